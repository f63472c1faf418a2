package ranges

import (
	_ "embed"
	"net/netip"
	"sync"
	"time"

	"github.com/sourceip/sourceip/clientip"
)

// The snapshots are the providers' documents in their published format (a
// subset of the entries where noted), taken from public mirrors because this
// package is built without access to the providers. snapshots/README.md
// records the same provenance as the table below.
var (
	//go:embed snapshots/cloudflare-ips-v4.txt
	snapCloudflareV4 string
	//go:embed snapshots/cloudflare-ips-v6.txt
	snapCloudflareV6 string
	//go:embed snapshots/aws-ip-ranges-cloudfront-origin-facing.json
	snapAWS string
	//go:embed snapshots/google-cloud.json
	snapGoogleCloud string
	//go:embed snapshots/azure-service-tags-public-azurefrontdoor-backend.json
	snapAzure string
	//go:embed snapshots/fastly-public-ip-list.json
	snapFastly string
)

// Snapshot is a dated copy of a provider's ranges that ships inside the
// package. A [Refresher] starts from its source's snapshot when it has no
// usable copy on disk, so a service that cannot reach the provider still
// trusts the provider's edge as it was on Date — never nothing, never
// everything.
type Snapshot struct {
	// Name identifies the snapshot: "cloudflare",
	// "aws-cloudfront-origin-facing", "google-cloud",
	// "google-load-balancers", "azure-frontdoor-backend" or "fastly".
	Name string
	// Provider is the publisher.
	Provider Provider
	// Set holds the snapshot's prefixes.
	Set clientip.PrefixSet
	// Date is when the data was known to be the provider's current list:
	// the publication time the document carries (AWS syncToken, Google
	// syncToken), or else the time the mirror fetched it (Cloudflare,
	// Fastly, Azure), or the day the documentation was read (Google's load
	// balancer ranges). DateKind says which.
	Date time.Time
	// DateKind says what Date is.
	DateKind string
	// Origin lists the provider's URLs for the data.
	Origin []string
	// Documentation lists the provider's pages that describe the list.
	Documentation []string
	// Mirror names the public repository, commit and file the data was
	// taken from, or "" for a list copied from documentation.
	Mirror string
	// Note says how the file differs from the provider's whole document.
	Note string
}

type snapshotDef struct {
	Snapshot
	parse func() (clientip.PrefixSet, error)
}

const (
	femueller = "github.com/femueller/cloud-ip-ranges@60937f4cdba4fca4d1706d0bfec2d72d9029c54d"
	seligman  = "github.com/seligman/aws-ip-ranges@7a942b53c75c61d9c3666d7b945b4d4561d7ef8d"
)

func snapshotDefs() []snapshotDef {
	return []snapshotDef{
		{Snapshot{
			Name:          "aws-cloudfront-origin-facing",
			Provider:      ProviderAWS,
			Date:          time.Date(2026, 8, 22, 15, 17, 5, 0, time.UTC),
			DateKind:      "published (syncToken 1787411825, createDate 2026-08-22-15-17-05)",
			Origin:        []string{awsURL},
			Documentation: []string{awsDoc1, awsDoc2},
			Mirror:        seligman + ":ip-ranges.json",
			Note:          "entries of service CLOUDFRONT_ORIGIN_FACING only (46 IPv4, 3 IPv6); every other byte as published",
		}, func() (clientip.PrefixSet, error) {
			return ParseAWS([]byte(snapAWS), AWSFilter{Services: []string{AWSServiceCloudFrontOriginFacing}})
		}},
		{Snapshot{
			Name:          "azure-frontdoor-backend",
			Provider:      ProviderAzure,
			Date:          time.Date(2025, 7, 22, 14, 30, 28, 0, time.UTC),
			DateKind:      "first fetched by the mirror (changeNumber 363; commit a7f298dfaefc136ba5ef7146c903f1b15591185f)",
			Origin:        []string{azureDownloadPage},
			Documentation: []string{azureDoc1, azureDoc2},
			Mirror:        femueller + ":microsoft-azure-ip-ranges.json",
			Note:          "the value of tag AzureFrontDoor.Backend only; every other byte (CRLF line ends included) as published",
		}, func() (clientip.PrefixSet, error) {
			return ParseAzureServiceTags([]byte(snapAzure), AzureTagFrontDoorBackend)
		}},
		{Snapshot{
			Name:          "cloudflare",
			Provider:      ProviderCloudflare,
			Date:          time.Date(2025, 7, 25, 7, 30, 34, 0, time.UTC),
			DateKind:      "fetched by the mirror (the lists carry no date; unchanged there since 2024-10-29 for IPv4 and 2023-10-11 for IPv6)",
			Origin:        []string{cloudflareV4URL, cloudflareV6URL},
			Documentation: []string{cloudflareDoc},
			Mirror:        femueller + ":cloudflare-v4-ip-ranges.txt,cloudflare-v6-ip-ranges.txt",
			Note:          "as published",
		}, cloudflareSnapshot},
		{Snapshot{
			Name:          "fastly",
			Provider:      ProviderFastly,
			Date:          time.Date(2025, 7, 25, 7, 30, 34, 0, time.UTC),
			DateKind:      "fetched by the mirror (the list carries no date; unchanged there since 2024-10-08)",
			Origin:        []string{fastlyURL},
			Documentation: []string{fastlyDoc},
			Mirror:        femueller + ":fastly-ip-ranges.json",
			Note:          "as published",
		}, func() (clientip.PrefixSet, error) { return ParseFastly([]byte(snapFastly)) }},
		{Snapshot{
			Name:          "google-cloud",
			Provider:      ProviderGoogleCloud,
			Date:          time.Date(2025, 7, 25, 2, 16, 28, 780e6, time.UTC),
			DateKind:      "published (syncToken 1753409788780 ms; creationTime 2025-07-24T19:16:28.780563 is US Pacific time)",
			Origin:        []string{googleCloudURL},
			Documentation: []string{googleCloudDoc},
			Mirror:        femueller + ":google-cloud-ip-ranges.json",
			Note:          "as published",
		}, func() (clientip.PrefixSet, error) { return ParseGoogleCloud([]byte(snapGoogleCloud)) }},
		{Snapshot{
			Name:          "google-load-balancers",
			Provider:      ProviderGoogleCloud,
			Date:          time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC),
			DateKind:      "documentation read (Google publishes these ranges only in its documentation)",
			Documentation: []string{googleLBDoc1, googleLBDoc2},
			Note:          "the health-check and Google Front End proxy ranges of Google's proxy-based load balancers",
		}, func() (clientip.PrefixSet, error) {
			return clientip.NewPrefixSet(
				netip.MustParsePrefix("35.191.0.0/16"),
				netip.MustParsePrefix("130.211.0.0/22"),
				netip.MustParsePrefix("2600:2d00:1:b029::/64"),
				netip.MustParsePrefix("2600:2d00:1:1::/64"),
			)
		}},
	}
}

func cloudflareSnapshot() (clientip.PrefixSet, error) {
	v4, err := ParseCIDRList([]byte(snapCloudflareV4))
	if err != nil {
		return v4, err
	}
	v6, err := ParseCIDRList([]byte(snapCloudflareV6))
	return v4.Union(v6), err
}

// snapshots parses every embedded snapshot once. A snapshot that fails to
// parse is left out (the package's tests prove that none does).
var snapshots = sync.OnceValue(func() map[string]Snapshot {
	m := make(map[string]Snapshot)
	for _, d := range snapshotDefs() {
		set, err := d.parse()
		if err != nil {
			continue
		}
		s := d.Snapshot
		s.Set = set
		m[s.Name] = s
	}
	return m
})

// Snapshots returns every snapshot the package ships, ordered by name. Each
// call returns new slices; the sets are shared and immutable.
func Snapshots() []Snapshot {
	var out []Snapshot
	for _, d := range snapshotDefs() {
		if s, ok := snapshots()[d.Name]; ok {
			out = append(out, s)
		}
	}
	return out
}

// SnapshotNamed returns the snapshot with the given [Snapshot].Name and
// reports whether there is one.
func SnapshotNamed(name string) (Snapshot, bool) {
	s, ok := snapshots()[name]
	return s, ok
}

// GoogleLoadBalancerRanges returns the documented source ranges of Google
// Cloud's proxy-based load balancers — the Google Front Ends and health
// checkers that connect to backends: 35.191.0.0/16, 130.211.0.0/22,
// 2600:2d00:1:b029::/64 and 2600:2d00:1:1::/64, from
// https://cloud.google.com/load-balancing/docs/firewall-rules and
// https://cloud.google.com/load-balancing/docs/health-check-concepts#ip-ranges.
// Google publishes them nowhere in machine-readable form, so there is no
// [Source] to refresh them; the snapshot's Date is when the documentation
// was read. Backends of a global external Application Load Balancer with
// internet NEGs see other addresses (Google lists them in the
// _cloud-eoips.googleusercontent.com DNS TXT record), and Envoy-based
// regional load balancers connect from your proxy-only subnet.
func GoogleLoadBalancerRanges() Snapshot {
	s, _ := SnapshotNamed("google-load-balancers")
	return s
}
