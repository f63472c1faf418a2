package ranges

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/sourceip/sourceip/clientip"
)

// Source says where a provider publishes a range list, how the list is read
// and filtered, and which embedded [Snapshot] (if any) covers it. A Source is
// immutable and safe for concurrent use; build one with [NewSource] or one of
// the constructors for the common edges ([Cloudflare], [CloudFront],
// [Fastly], [AzureFrontDoor]).
type Source struct {
	provider  Provider
	locations []string
	parse     func([]byte) (clientip.PrefixSet, error)
	maxBytes  int
	id        string
	snapName  string                             // "" when no snapshot covers the source
	snapParse func() (clientip.PrefixSet, error) // the snapshot, filtered like the source
}

// SourceConfig configures a [Source]. The zero value is invalid: a Provider
// is required.
type SourceConfig struct {
	// Provider selects the format. Required.
	Provider Provider

	// Locations lists where the documents are: https URLs, or paths of local
	// files (an operator-managed list, or an Azure service-tags file
	// downloaded by a job). When there are several, the set is the union of
	// all of them and a refresh succeeds only if every one does. The zero
	// value means the provider's published URLs (Cloudflare's ips-v4 and
	// ips-v6, AWS's ip-ranges.json, Google's cloud.json, Fastly's
	// public-ip-list); ProviderAzure and ProviderCIDRList have none and need
	// one. At most 8.
	Locations []string

	// Services selects AWS services (see [AWSFilter]). Required for
	// ProviderAWS, refused for the others.
	Services []string

	// Regions selects AWS regions or Google Cloud scopes. The zero value
	// selects all. Refused for providers other than AWS and Google Cloud.
	Regions []string

	// Tag is the Azure service tag, such as [AzureTagFrontDoorBackend].
	// Required for ProviderAzure, refused for the others.
	Tag string

	// AllowHTTP permits plain http:// locations, for a mirror reached over a
	// network you trust. The zero value refuses them: anyone on the path of a
	// plain-HTTP fetch chooses whom you trust.
	AllowHTTP bool
}

const maxLocations = 8

// NewSource validates cfg and returns the Source it describes. Errors wrap
// [ErrInvalidConfig].
func NewSource(cfg SourceConfig) (*Source, error) {
	bad := func(format string, a ...any) (*Source, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	p := cfg.Provider
	if p == ProviderUnknown || int(p) >= len(providerNames) {
		return bad("a provider is required")
	}
	if len(cfg.Services) > 0 && p != ProviderAWS {
		return bad("Services apply only to AWS, not %s", p)
	}
	if len(cfg.Regions) > 0 && p != ProviderAWS && p != ProviderGoogleCloud {
		return bad("Regions apply only to AWS and Google Cloud, not %s", p)
	}
	if cfg.Tag != "" && p != ProviderAzure {
		return bad("Tag applies only to Azure, not %s", p)
	}
	locs := slices.Clone(cfg.Locations)
	if len(locs) == 0 {
		switch p {
		case ProviderCloudflare:
			locs = []string{cloudflareV4URL, cloudflareV6URL}
		case ProviderAWS:
			locs = []string{awsURL}
		case ProviderGoogleCloud:
			locs = []string{googleCloudURL}
		case ProviderFastly:
			locs = []string{fastlyURL}
		default:
			return bad("%s needs a location (a URL or a file path)", p)
		}
	}
	if len(locs) > maxLocations {
		return bad("%d locations, at most %d", len(locs), maxLocations)
	}
	for _, l := range locs {
		if err := checkLocation(l, cfg.AllowHTTP); err != nil {
			return nil, err
		}
	}
	services, regions := sortedCopy(cfg.Services), sortedCopy(cfg.Regions)
	s := &Source{provider: p, locations: locs}
	filter := ""
	switch p {
	case ProviderCloudflare, ProviderCIDRList:
		s.parse, s.maxBytes = ParseCIDRList, MaxCIDRListBytes
		if p == ProviderCloudflare {
			s.snapName = "cloudflare"
			s.snapParse = cloudflareSnapshot
		}
	case ProviderAWS:
		f := AWSFilter{Services: services, Regions: regions}
		if _, _, err := f.compile(); err != nil {
			return nil, err
		}
		s.parse = func(b []byte) (clientip.PrefixSet, error) { return ParseAWS(b, f) }
		s.maxBytes, filter = MaxAWSBytes, " "+f.String()
		if len(services) == 1 && services[0] == AWSServiceCloudFrontOriginFacing {
			s.snapName = "aws-cloudfront-origin-facing"
			s.snapParse = func() (clientip.PrefixSet, error) { return ParseAWS([]byte(snapAWS), f) }
		}
	case ProviderGoogleCloud:
		if _, err := stringList("Google Cloud scope", regions); err != nil {
			return nil, err
		}
		s.parse = func(b []byte) (clientip.PrefixSet, error) { return ParseGoogleCloud(b, regions...) }
		s.maxBytes = MaxGoogleCloudBytes
		if len(regions) > 0 {
			filter = " scopes=" + strings.Join(regions, ",")
		}
		s.snapName = "google-cloud"
		s.snapParse = func() (clientip.PrefixSet, error) { return ParseGoogleCloud([]byte(snapGoogleCloud), regions...) }
	case ProviderAzure:
		tag := cfg.Tag
		if tag == "" || strings.TrimSpace(tag) != tag {
			return bad("Azure needs a service tag name, such as %s", AzureTagFrontDoorBackend)
		}
		s.parse = func(b []byte) (clientip.PrefixSet, error) { return ParseAzureServiceTags(b, tag) }
		s.maxBytes, filter = MaxAzureBytes, " tag="+tag
		if tag == AzureTagFrontDoorBackend {
			s.snapName = "azure-frontdoor-backend"
			s.snapParse = func() (clientip.PrefixSet, error) { return ParseAzureServiceTags([]byte(snapAzure), tag) }
		}
	case ProviderFastly:
		s.parse, s.maxBytes = ParseFastly, MaxFastlyBytes
		s.snapName = "fastly"
		s.snapParse = func() (clientip.PrefixSet, error) { return ParseFastly([]byte(snapFastly)) }
	}
	s.id = p.String() + filter + " from " + strings.Join(locs, " ")
	return s, nil
}

func sortedCopy(v []string) []string {
	if len(v) == 0 {
		return nil
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return slices.Compact(v)
}

func checkLocation(l string, allowHTTP bool) error {
	if l == "" || strings.ContainsAny(l, "\x00\r\n") {
		return fmt.Errorf("%w: location %q is empty or has control characters", ErrInvalidConfig, truncate(l))
	}
	if !strings.Contains(l, "://") {
		return nil // a file path
	}
	u, err := url.Parse(l)
	if err != nil {
		return fmt.Errorf("%w: location %q: %v", ErrInvalidConfig, truncate(l), err)
	}
	switch {
	case u.Scheme == "http" && !allowHTTP:
		return fmt.Errorf("%w: location %q is plain http (set AllowHTTP for a mirror on a network you trust)", ErrInvalidConfig, truncate(l))
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%w: location %q: scheme must be https (or a file path)", ErrInvalidConfig, truncate(l))
	case u.Host == "":
		return fmt.Errorf("%w: location %q has no host", ErrInvalidConfig, truncate(l))
	case u.User != nil:
		return fmt.Errorf("%w: location %q carries credentials, which would appear in logs and status", ErrInvalidConfig, truncate(l))
	}
	return nil
}

func isURL(l string) bool { return strings.Contains(l, "://") }

func mustSource(cfg SourceConfig) *Source {
	s, err := NewSource(cfg)
	if err != nil { // unreachable: the callers' configurations are constant and tested
		panic(err)
	}
	return s
}

// Cloudflare returns the source of Cloudflare's ranges: the union of
// https://www.cloudflare.com/ips-v4 and https://www.cloudflare.com/ips-v6
// (listed at https://www.cloudflare.com/ips/). Cloudflare connects to origins
// from these addresses and reports the client in CF-Connecting-IP
// (https://developers.cloudflare.com/fundamentals/reference/http-headers/).
// The "cloudflare" snapshot covers it.
func Cloudflare() *Source { return mustSource(SourceConfig{Provider: ProviderCloudflare}) }

// CloudFront returns the source of CloudFront's origin-facing ranges: the
// CLOUDFRONT_ORIGIN_FACING entries of AWS's ip-ranges.json
// (https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/LocationsOfEdgeServers.html).
// CloudFront appends the viewer to X-Forwarded-For, which is the header to
// read (its CloudFront-Viewer-Address writes an IPv6 viewer and its port
// without brackets, and clientip refuses it;
// https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/adding-cloudfront-headers.html).
// The "aws-cloudfront-origin-facing"
// snapshot covers it.
func CloudFront() *Source {
	return mustSource(SourceConfig{Provider: ProviderAWS, Services: []string{AWSServiceCloudFrontOriginFacing}})
}

// Fastly returns the source of Fastly's ranges,
// https://api.fastly.com/public-ip-list. Fastly reports the client in
// Fastly-Client-IP
// (https://www.fastly.com/documentation/reference/http/http-headers/Fastly-Client-IP/).
// The "fastly" snapshot covers it.
func Fastly() *Source { return mustSource(SourceConfig{Provider: ProviderFastly}) }

// AzureFrontDoor returns the source of Azure Front Door's origin-facing
// ranges, the AzureFrontDoor.Backend tag of the service-tags file at
// location. Microsoft publishes that file weekly under a new URL
// (ServiceTags_Public_YYYYMMDD.json, linked from
// https://www.microsoft.com/en-us/download/details.aspx?id=56519), so
// location is a path your deployment keeps current or a URL you update — a
// fixed URL goes stale, which the refresher's age reports. Front Door
// appends the client's socket address to X-Forwarded-For (X-Azure-ClientIP
// is taken from a client's own X-Forwarded-For) and identifies the profile
// in X-Azure-FDID
// (https://learn.microsoft.com/en-us/azure/frontdoor/front-door-http-headers-protocol);
// check X-Azure-FDID too, because every Front Door profile connects from
// these ranges (the clientip/presets AzureFrontDoor preset does both). The
// "azure-frontdoor-backend" snapshot covers it.
func AzureFrontDoor(location string) (*Source, error) {
	return NewSource(SourceConfig{Provider: ProviderAzure, Locations: []string{location}, Tag: AzureTagFrontDoorBackend})
}

// Provider returns the source's provider.
func (s *Source) Provider() Provider { return s.provider }

// Locations returns a copy of the locations the source reads.
func (s *Source) Locations() []string { return slices.Clone(s.locations) }

// MaxBytes returns the size limit of one of the source's documents.
func (s *Source) MaxBytes() int { return s.maxBytes }

// Parse parses one document of the source with its provider's parser and
// filter.
func (s *Source) Parse(doc []byte) (clientip.PrefixSet, error) { return s.parse(doc) }

// String identifies the source: provider, filter and locations, such as
// "aws services=CLOUDFRONT_ORIGIN_FACING from https://ip-ranges.amazonaws.com/ip-ranges.json".
// A refresher's disk copy records it and is used only by the same source.
func (s *Source) String() string { return s.id }

// Snapshot returns the embedded snapshot that covers the source, filtered
// like the source, and reports whether there is one. The AWS snapshot holds
// only CLOUDFRONT_ORIGIN_FACING and the Azure one only
// AzureFrontDoor.Backend, so other AWS services and Azure tags have none; nor
// does ProviderCIDRList. It parses the embedded document on each call.
func (s *Source) Snapshot() (Snapshot, bool) {
	if s.snapName == "" {
		return Snapshot{}, false
	}
	snap, ok := SnapshotNamed(s.snapName)
	if !ok {
		return Snapshot{}, false
	}
	set, err := s.snapParse()
	if err != nil {
		return Snapshot{}, false // the filter selects nothing the snapshot holds
	}
	snap.Set = set
	return snap, true
}
