package ranges

import (
	"net/netip"
	"strings"
	"testing"
	"time"
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
	if len(got) != len(want) {
		t.Fatalf("%d snapshots parse, want %d (a snapshot that fails to parse is left out)", len(got), len(want))
	}
	for i, s := range got {
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("unexpected snapshot %q", s.Name)
			continue
		}
		if i > 0 && got[i-1].Name >= s.Name {
			t.Errorf("snapshots not ordered by name: %q after %q", s.Name, got[i-1].Name)
		}
		if s.Set.Len() != w.prefixes || !s.Set.Contains(netip.MustParseAddr(w.inside)) {
			t.Errorf("%s: %d prefixes (want %d), contains %s: %v", s.Name, s.Set.Len(), w.prefixes, w.inside, s.Set.Contains(netip.MustParseAddr(w.inside)))
		}
		if err := CheckSet(s.Set, false); err != nil {
			t.Errorf("%s: the snapshot fails the refresher's guard: %v", s.Name, err)
		}
		if s.Date.IsZero() || s.Date.Location() != time.UTC || s.DateKind == "" || len(s.Documentation) == 0 || s.Note == "" || s.Provider == ProviderUnknown {
			t.Errorf("%s: incomplete provenance: %+v", s.Name, s)
		}
		if s.Name != "google-load-balancers" && (len(s.Origin) == 0 || !strings.Contains(s.Mirror, "@") || !strings.Contains(s.Mirror, ":")) {
			t.Errorf("%s: origin or mirror missing: %q %q", s.Name, s.Origin, s.Mirror)
		}
	}
}

// The AWS snapshot's date is its syncToken, and Google's is its syncToken
// (milliseconds): Google's creationTime is US Pacific time, not UTC.
func TestSnapshotDatesMatchDocuments(t *testing.T) {
	aws, _ := SnapshotNamed("aws-cloudfront-origin-facing")
	if !aws.Date.Equal(time.Unix(1787411825, 0)) || !strings.Contains(snapAWS, `"syncToken": "1787411825"`) {
		t.Errorf("AWS snapshot date %s does not match its syncToken", aws.Date)
	}
	g, _ := SnapshotNamed("google-cloud")
	if !g.Date.Equal(time.UnixMilli(1753409788780)) || !strings.Contains(snapGoogleCloud, `"syncToken": "1753409788780"`) {
		t.Errorf("Google snapshot date %s does not match its syncToken", g.Date)
	}
}

func TestSourceSnapshotCoverage(t *testing.T) {
	az, err := AzureFrontDoor("/var/lib/ranges/ServiceTags_Public.json")
	if err != nil {
		t.Fatal(err)
	}
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
			if ok != (tc.want != "") || s.Name != tc.want {
				t.Fatalf("Snapshot() = %q, %v; want %q", s.Name, ok, tc.want)
			}
			if ok && s.Set.Len() != tc.prefixes {
				t.Errorf("%d prefixes, want %d", s.Set.Len(), tc.prefixes)
			}
		})
	}
}

func TestGoogleLoadBalancerRanges(t *testing.T) {
	s := GoogleLoadBalancerRanges()
	if got := s.Set.String(); got != "35.191.0.0/16,130.211.0.0/22,2600:2d00:1:1::/64,2600:2d00:1:b029::/64" {
		t.Errorf("set = %s", got)
	}
	if s.Date.IsZero() || !strings.Contains(strings.Join(s.Documentation, " "), "cloud.google.com/load-balancing") {
		t.Errorf("provenance: %+v", s)
	}
}
