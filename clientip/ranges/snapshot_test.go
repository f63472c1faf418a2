package ranges

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	must "github.com/stretchr/testify/require"
)

// Every embedded snapshot parses with its provider's strict parser, passes
// the refresher's own guard (so it can be a floor), and says where it came
// from and when.
func TestSnapshots(t *testing.T) {
	want := map[string]struct {
		prefixes int
		inside   string
	}{
		"aws-cloudfront-origin-facing": {49, "130.176.88.1"},
		"azure-frontdoor-backend":      {170, "13.73.248.17"},
		"cloudflare":                   {22, "104.16.0.1"},
		"fastly":                       {21, "151.101.1.1"},
		"google-cloud":                 {782, "34.35.0.1"},
		"google-load-balancers":        {4, "35.191.0.1"},
	}
	got := Snapshots()
	must.Len(t, got, len(want), "a snapshot that fails to parse is left out")
	for i, s := range got {
		w, ok := want[s.Name]
		if !assert.True(t, ok, "unexpected snapshot %q", s.Name) {
			continue
		}
		if i > 0 {
			assert.Less(t, got[i-1].Name, s.Name, "snapshots ordered by name")
		}
		assert.Equal(t, w.prefixes, s.Set.Len(), "%s: prefixes", s.Name)
		assert.True(t, s.Set.Contains(netip.MustParseAddr(w.inside)), "%s contains %s", s.Name, w.inside)
		assert.NoError(t, CheckSet(s.Set, false), "%s: the snapshot fails the refresher's guard", s.Name)
		assert.False(t, s.Date.IsZero(), "%s: incomplete provenance: %+v", s.Name, s)
		assert.Equal(t, time.UTC, s.Date.Location(), "%s: incomplete provenance: %+v", s.Name, s)
		assert.NotEmpty(t, s.DateKind, "%s: incomplete provenance: %+v", s.Name, s)
		assert.NotEmpty(t, s.Documentation, "%s: incomplete provenance: %+v", s.Name, s)
		assert.NotEmpty(t, s.Note, "%s: incomplete provenance: %+v", s.Name, s)
		assert.NotEqual(t, ProviderUnknown, s.Provider, "%s: incomplete provenance: %+v", s.Name, s)
		if s.Name != "google-load-balancers" {
			assert.NotEmpty(t, s.Origin, "%s: origin missing", s.Name)
			assert.Contains(t, s.Mirror, "@", "%s: mirror missing", s.Name)
			assert.Contains(t, s.Mirror, ":", "%s: mirror missing", s.Name)
		}
	}
}

// The AWS snapshot's date is its syncToken, and Google's is its syncToken
// (milliseconds): Google's creationTime is US Pacific time, not UTC.
func TestSnapshotDatesMatchDocuments(t *testing.T) {
	aws, _ := SnapshotNamed("aws-cloudfront-origin-facing")
	assert.True(t, aws.Date.Equal(time.Unix(1787411825, 0)), "AWS snapshot date %s does not match its syncToken", aws.Date)
	assert.Contains(t, snapAWS, `"syncToken": "1787411825"`)
	g, _ := SnapshotNamed("google-cloud")
	assert.True(t, g.Date.Equal(time.UnixMilli(1753409788780)), "Google snapshot date %s does not match its syncToken", g.Date)
	assert.Contains(t, snapGoogleCloud, `"syncToken": "1753409788780"`)
}

func TestSourceSnapshotCoverage(t *testing.T) {
	az, err := AzureFrontDoor("/var/lib/ranges/ServiceTags_Public.json")
	must.NoError(t, err)
	otherTag, _ := NewSource(SourceConfig{Provider: ProviderAzure, Locations: []string{"/x.json"}, Tag: "AzureFrontDoor.Frontend"})
	route53, _ := NewSource(SourceConfig{Provider: ProviderAWS, Services: []string{"ROUTE53_HEALTHCHECKS"}})
	cfPlus, _ := NewSource(SourceConfig{Provider: ProviderAWS, Services: []string{AWSServiceCloudFrontOriginFacing, "CLOUDFRONT"}})
	cfRegion, _ := NewSource(SourceConfig{Provider: ProviderAWS, Services: []string{AWSServiceCloudFrontOriginFacing}, Regions: []string{"us-east-1"}})
	gcpScope, _ := NewSource(SourceConfig{Provider: ProviderGoogleCloud, Regions: []string{"africa-south1"}})
	list, _ := NewSource(SourceConfig{Provider: ProviderCIDRList, Locations: []string{"/etc/proxies.txt"}})
	tests := []struct {
		name     string
		src      *Source
		want     string // snapshot name, "" for none
		prefixes int
	}{
		{"Cloudflare", Cloudflare(), "cloudflare", 22},
		{"CloudFront", CloudFront(), "aws-cloudfront-origin-facing", 49},
		{"Fastly", Fastly(), "fastly", 21},
		{"Azure Front Door", az, "azure-frontdoor-backend", 170},
		{"Google Cloud scope filter applies to the snapshot", gcpScope, "google-cloud", 5},
		{"another Azure tag has no snapshot", otherTag, "", 0},
		{"another AWS service has no snapshot", route53, "", 0},
		{"a partial snapshot is no snapshot: CLOUDFRONT is not embedded", cfPlus, "", 0},
		{"a filter that selects nothing of the snapshot", cfRegion, "", 0},
		{"a CIDR list has no snapshot", list, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := tc.src.Snapshot()
			must.Equal(t, tc.want != "", ok, "Snapshot() = %q", s.Name)
			must.Equal(t, tc.want, s.Name, "Snapshot()")
			if ok {
				assert.Equal(t, tc.prefixes, s.Set.Len(), "prefixes")
			}
		})
	}
}

func TestGoogleLoadBalancerRanges(t *testing.T) {
	s := GoogleLoadBalancerRanges()
	assert.Equal(t, "35.191.0.0/16,130.211.0.0/22,2600:2d00:1:1::/64,2600:2d00:1:b029::/64", s.Set.String(), "set")
	assert.False(t, s.Date.IsZero(), "provenance: %+v", s)
	assert.Contains(t, strings.Join(s.Documentation, " "), "cloud.google.com/load-balancing", "provenance")
}
