package ranges

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"testing"
)

func BenchmarkCurrent(b *testing.B) {
	r, err := NewRefresher(RefresherConfig{Source: Cloudflare()})
	if err != nil {
		b.Fatal(err)
	}
	a := netip.MustParseAddr("172.64.1.1")
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !r.Current().Contains(a) {
				b.Fatal("not contained")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !r.Current().Contains(a) {
					b.Fatal("not contained")
				}
			}
		})
	})
}

func BenchmarkParse(b *testing.B) {
	azure := bigServiceTags(b, 2000)
	for _, bc := range []struct {
		name  string
		doc   []byte
		parse func([]byte) error
	}{
		{"cloudflare-v4", []byte(snapCloudflareV4), func(d []byte) error { _, err := ParseCIDRList(d); return err }},
		{"aws-cloudfront-snapshot", []byte(snapAWS), func(d []byte) error { _, err := ParseAWS(d, cloudFrontOnly); return err }},
		{"google-cloud", []byte(snapGoogleCloud), func(d []byte) error { _, err := ParseGoogleCloud(d); return err }},
		{fmt.Sprintf("azure-%dMB", len(azure)>>20), azure, func(d []byte) error { _, err := ParseAzureServiceTags(d, "7.AzureFrontDoor.Backend"); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if err := bc.parse(bc.doc); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(bc.doc)))
			b.ReportAllocs()
			for b.Loop() {
				_ = bc.parse(bc.doc)
			}
		})
	}
}

// bigServiceTags returns a service-tags document of about the size
// Microsoft publishes (4 MB): the sample's values repeated copies times
// under distinct names ("7.AzureFrontDoor.Backend").
func bigServiceTags(b *testing.B, copies int) []byte {
	var doc struct {
		ChangeNumber int              `json:"changeNumber"`
		Cloud        string           `json:"cloud"`
		Values       []map[string]any `json:"values"`
	}
	if err := json.Unmarshal(readFixture(b, "testdata/azure-service-tags-sample.json"), &doc); err != nil {
		b.Fatal(err)
	}
	var values []map[string]any
	for i := range copies {
		for _, v := range doc.Values {
			c := maps.Clone(v)
			c["name"] = fmt.Sprintf("%d.%s", i, v["name"])
			values = append(values, c)
		}
	}
	doc.Values = values
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	return out
}

var cloudFrontOnly = AWSFilter{Services: []string{AWSServiceCloudFrontOriginFacing}}

func BenchmarkDiff(b *testing.B) {
	g, _ := SnapshotNamed("google-cloud")
	cut := g.Set.Prefixes()
	next, _ := ParseCIDRList([]byte(strings.Join(func() []string {
		var s []string
		for _, p := range cut[:len(cut)-50] {
			s = append(s, p.String())
		}
		return s
	}(), "\n")))
	b.ReportAllocs()
	for b.Loop() {
		_ = Diff(g.Set, next)
	}
}
