package ranges

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/clientip"
)

// checkParsed holds for every parser: no panic (the fuzzer checks that), an
// error wraps one of the package's sentinels, and a success is a non-empty
// set of canonical prefixes — valid, host bits clear, no zone, no
// IPv4-mapped alias.
func checkParsed(t *testing.T, s clientip.PrefixSet, err error) {
	t.Helper()
	if err != nil {
		for _, e := range []error{ErrTooLarge, ErrMalformed, ErrInvalidPrefix, ErrEmpty, ErrTagNotFound} {
			if errors.Is(err, e) {
				return
			}
		}
		t.Fatalf("error wraps no sentinel: %v", err)
	}
	if s.Len() == 0 {
		t.Fatal("success with an empty set")
	}
	for _, p := range s.Prefixes() {
		if !p.IsValid() || p.Masked() != p || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			t.Fatalf("non-canonical prefix %s in the result", p)
		}
	}
}

// A JSON parser succeeds only on one valid JSON document.
func checkJSON(t *testing.T, b []byte, err error) {
	t.Helper()
	if err == nil && !json.Valid(bytes.TrimPrefix(b, utf8BOM)) {
		t.Fatal("success on invalid JSON")
	}
}

func FuzzParseCIDRList(f *testing.F) {
	for _, seed := range []string{snapCloudflareV4, snapCloudflareV6, "# c\n192.0.2.0/24 # x\r\n\n2001:db8::1", "192.0.2.1/24",
		"fe80::1%eth0", "<html>", "loopback", "192.0.2.0/24,198.51.100.0/24", "::ffff:192.0.2.0/120", "0.0.0.0/0"} {
		f.Add([]byte(seed))
	}
	f.Add(readFixture(f, "testdata/cloudflare-ips-v4-500.html"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseCIDRList(b)
		checkParsed(t, s, err)
		if err != nil || bytes.HasPrefix(b, utf8BOM) {
			return
		}
		// Differential oracle: clientip's own prefix-list parser, given the
		// same entries without comments, builds the same set.
		var entries []string
		for line := range strings.Lines(string(b)) {
			line, _, _ = strings.Cut(line, "#")
			entries = append(entries, line)
		}
		want, werr := clientip.ParsePrefixSet(strings.Join(entries, "\n"))
		if werr != nil || want.String() != s.String() {
			t.Fatalf("ParseCIDRList = %s; clientip.ParsePrefixSet = %s, %v", s, want, werr)
		}
		// Round trip: the set written one prefix a line parses to itself.
		again, err := ParseCIDRList([]byte(strings.ReplaceAll(s.String(), ",", "\n")))
		if err != nil || again.String() != s.String() {
			t.Fatalf("round trip: %s, %v", again, err)
		}
	})
}

func FuzzParseAWS(f *testing.F) {
	f.Add([]byte(snapAWS))
	f.Add(readFixture(f, "testdata/aws-ip-ranges-sample.json"))
	f.Add([]byte(`{"syncToken":"1","createDate":"2026-01-01-00-00-00","prefixes":[{"ip_prefix":"192.0.2.0/24","region":"r","service":"EC2"}],"ipv6_prefixes":[]}`))
	filter := AWSFilter{Services: []string{AWSServiceCloudFrontOriginFacing, "EC2"}}
	wider := AWSFilter{Services: []string{AWSServiceCloudFrontOriginFacing, "EC2", "AMAZON"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseAWS(b, filter)
		checkParsed(t, s, err)
		checkJSON(t, b, err)
		if err == nil {
			// A wider filter selects a superset.
			w, err := ParseAWS(b, wider)
			if err != nil || Diff(s, w).Shrink != 0 {
				t.Fatalf("wider filter: %s, %v (narrow %s)", w, err, s)
			}
		}
	})
}

func FuzzParseGoogleCloud(f *testing.F) {
	f.Add([]byte(snapGoogleCloud[:2000] + `}]}`))
	f.Add([]byte(`{"syncToken":"1","creationTime":"2025-07-24T19:16:28.780563","prefixes":[{"ipv6Prefix":"2001:db8::/32","service":"Google Cloud","scope":"s"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseGoogleCloud(b)
		checkParsed(t, s, err)
		checkJSON(t, b, err)
	})
}

func FuzzParseAzureServiceTags(f *testing.F) {
	f.Add([]byte(snapAzure))
	f.Add(readFixture(f, "testdata/azure-service-tags-sample.json"))
	f.Add([]byte("\xef\xbb\xbf" + `{"changeNumber":1,"cloud":"Public","values":[{"name":"AzureFrontDoor.Backend","id":"x","properties":{"addressPrefixes":["192.0.2.0/24"]}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseAzureServiceTags(b, AzureTagFrontDoorBackend)
		checkParsed(t, s, err)
		checkJSON(t, b, err)
	})
}

func FuzzParseFastly(f *testing.F) {
	f.Add([]byte(snapFastly))
	f.Add([]byte(""))
	f.Add([]byte(`{"addresses":["192.0.2.0/24"],"ipv6_addresses":["2001:db8::/32"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseFastly(b)
		checkParsed(t, s, err)
		checkJSON(t, b, err)
	})
}

// FuzzDiff compares Diff's range arithmetic with counting every address of
// one /16 by membership.
func FuzzDiff(f *testing.F) {
	f.Add([]byte{0, 0, 16, 128, 0, 17}, []byte{0, 0, 17})
	f.Add([]byte{1, 2, 24, 1, 3, 24}, []byte{1, 0, 22})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		build := func(in []byte) clientip.PrefixSet {
			var ps []netip.Prefix
			for i := 0; i+2 < len(in) && len(ps) < 16; i += 3 {
				bits := 16 + int(in[i+2])%17
				p, _ := netip.AddrFrom4([4]byte{198, 18, in[i], in[i+1]}).Prefix(bits)
				ps = append(ps, p)
			}
			s, _ := clientip.NewPrefixSet(ps...)
			return s
		}
		cur, next := build(a), build(b)
		var inCur, lost, gained float64
		for x := range 1 << 16 {
			addr := netip.AddrFrom4([4]byte{198, 18, byte(x >> 8), byte(x)})
			c, n := cur.Contains(addr), next.Contains(addr)
			if c {
				inCur++
			}
			if c && !n {
				lost++
			}
			if n && !c {
				gained++
			}
		}
		got := Diff(cur, next)
		wantShrink, wantGrowth := 0.0, 0.0
		if inCur > 0 {
			wantShrink, wantGrowth = lost/inCur, gained/inCur
		}
		if math.Abs(got.Shrink-wantShrink) > 1e-12 || math.Abs(got.Growth-wantGrowth) > 1e-12 {
			t.Fatalf("Diff(%s, %s) = %+v, counting gives shrink %v growth %v", cur, next, got, wantShrink, wantGrowth)
		}
	})
}

// FuzzReadCache feeds the refresher's disk copy, which whoever can write the
// file chooses: no panic; an error wraps ErrCache; a copy that is used is
// a set CheckSet accepts, made of canonical prefixes, with one document per
// location of the source.
func FuzzReadCache(f *testing.F) {
	src := Cloudflare()
	f.Add([]byte(`{"version": 1, "source": "` + src.String() + `", "confirmed": "2026-11-30T00:00:00Z", "documents": [
		{"location": "https://www.cloudflare.com/ips-v4", "etag": "\"x\"", "prefixes": ["104.16.0.0/13"]},
		{"location": "https://www.cloudflare.com/ips-v6", "prefixes": ["2606:4700::/32"]}]}`))
	f.Add([]byte(`{"version": 1, "source": "` + src.String() + `", "confirmed": "2026-11-30T00:00:00Z", "documents": [
		{"location": "https://www.cloudflare.com/ips-v4", "prefixes": ["0.0.0.0/0"]},
		{"location": "https://www.cloudflare.com/ips-v6", "prefixes": ["::ffff:10.0.0.0/104"]}]}`))
	f.Add([]byte(`{"version": 1, "source": "` + src.String() + `", "confirmed": "2026-11-30T00:00:00Z", "documents": [
		{"location": "https://www.cloudflare.com/ips-v4", "prefixes": ["104.16.0.0/13"]},
		{"location": "https://www.cloudflare.com/ips-v6", "prefixes": ["2606:4700::/32"]}], "baseline": ["104.16.0.0/14", "nonsense"]}`))
	f.Add([]byte(`{"version": 1}`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "cache.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := readCache(path, src, false)
		docs, set, confirmed := d.docs, d.set, d.confirmed
		if err != nil {
			if !errors.Is(err, ErrCache) {
				t.Fatalf("error does not wrap ErrCache: %v", err)
			}
			return
		}
		if err := CheckSet(set, false); err != nil {
			t.Fatalf("a copy CheckSet refuses was used: %v", err)
		}
		if len(docs) != len(src.locations) || confirmed.IsZero() {
			t.Fatalf("%d documents for %d locations, confirmed %v", len(docs), len(src.locations), confirmed)
		}
		checkParsed(t, set, nil)
	})
}
