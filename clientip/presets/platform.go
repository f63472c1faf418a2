package presets

import (
	"slices"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
	"github.com/sourceip/sourceip/internal/enumtext"
)

// Platform names an edge a deployment puts in front of its service. Each
// one fixes the header the edge reports the client in, where its
// origin-facing ranges come from, and the documentation both rest on; see
// the package documentation for the table.
//
// The zero value is [PlatformUnknown], which [New] refuses.
type Platform uint8

const (
	// PlatformUnknown is the zero Platform.
	PlatformUnknown Platform = iota
	// Cloudflare: CF-Connecting-IP
	// (https://developers.cloudflare.com/fundamentals/reference/http-headers/),
	// Cloudflare's published ranges (https://www.cloudflare.com/ips/).
	Cloudflare
	// CloudFront: X-Forwarded-For, to which CloudFront appends the viewer
	// (https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/RequestAndResponseBehaviorCustomOrigin.html#RequestCustomIPAddresses),
	// AWS's CLOUDFRONT_ORIGIN_FACING ranges
	// (https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/LocationsOfEdgeServers.html).
	CloudFront
	// Fastly: Fastly-Client-IP, which your service must set in VCL
	// (https://www.fastly.com/documentation/reference/http/http-headers/Fastly-Client-IP/),
	// Fastly's public IP list
	// (https://www.fastly.com/documentation/reference/api/utils/public-ip-list/).
	Fastly
	// Akamai: True-Client-IP, enabled in the Origin Server behavior with
	// clients not allowed to set it
	// (https://techdocs.akamai.com/property-mgr/docs/origin-server), and
	// the Origin IP ACL or Site Shield ranges you supply
	// (https://techdocs.akamai.com/origin-ip-acl/docs/welcome).
	Akamai
	// AzureFrontDoor: X-Forwarded-For and X-Azure-FDID
	// (https://learn.microsoft.com/en-us/azure/frontdoor/front-door-http-headers-protocol),
	// the AzureFrontDoor.Backend service tag
	// (https://learn.microsoft.com/en-us/azure/frontdoor/origin-security).
	AzureFrontDoor
	// Fly: Fly-Client-IP (https://fly.io/docs/networking/request-headers/),
	// the fly-proxy addresses you supply (Fly.io publishes none).
	Fly
	// GoogleLoadBalancer: X-Forwarded-For through Google's external
	// Application Load Balancer, client then forwarding rule
	// (https://cloud.google.com/load-balancing/docs/https#x-forwarded-for_header),
	// its Google Front Ends' documented source ranges
	// (https://cloud.google.com/load-balancing/docs/firewall-rules) and
	// your forwarding rules' addresses.
	GoogleLoadBalancer
	// CloudRun: X-Forwarded-For as Google's front end hands it to a Cloud
	// Run container, which has no socket peer to check; Google documents
	// the header for its load balancers (as GoogleLoadBalancer), not for
	// Cloud Run, and publishes no ranges for it.
	CloudRun
	// Envoy: X-Forwarded-For appended by an edge Envoy with
	// use_remote_address
	// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_conn_man/headers#x-forwarded-for),
	// whose addresses you supply.
	Envoy
)

var platformNames = [...]string{
	PlatformUnknown:    "unknown",
	Cloudflare:         "cloudflare",
	CloudFront:         "cloudfront",
	Fastly:             "fastly",
	Akamai:             "akamai",
	AzureFrontDoor:     "azure-front-door",
	Fly:                "fly",
	GoogleLoadBalancer: "google-load-balancer",
	CloudRun:           "cloud-run",
	Envoy:              "envoy",
}

// Platforms returns every platform, in the order of the constants.
func Platforms() []Platform {
	out := make([]Platform, 0, len(platformNames)-1)
	for p := Cloudflare; int(p) < len(platformNames); p++ {
		out = append(out, p)
	}
	return out
}

// String returns the platform's name: "cloudflare", "cloudfront", "fastly",
// "akamai", "azure-front-door", "fly", "google-load-balancer", "cloud-run",
// "envoy", or "unknown". It is also the name of the range set a preset's
// store keeps the edge's ranges under.
func (p Platform) String() string { return enumtext.String(platformNames[:], p, "Platform") }

// goNames are the constants' names, for GoString.
var goNames = [...]string{
	PlatformUnknown:    "PlatformUnknown",
	Cloudflare:         "Cloudflare",
	CloudFront:         "CloudFront",
	Fastly:             "Fastly",
	Akamai:             "Akamai",
	AzureFrontDoor:     "AzureFrontDoor",
	Fly:                "Fly",
	GoogleLoadBalancer: "GoogleLoadBalancer",
	CloudRun:           "CloudRun",
	Envoy:              "Envoy",
}

// GoString implements [fmt.GoStringer]: the Go expression for p, such as
// "presets.Cloudflare", as %#v prints it (and as a proposed configuration
// names it).
func (p Platform) GoString() string {
	return "presets." + enumtext.String(goNames[:], p, "Platform")
}

// MarshalText implements [encoding.TextMarshaler] with the names String
// returns. PlatformUnknown and values outside the list are an error.
func (p Platform) MarshalText() ([]byte, error) {
	if p == PlatformUnknown {
		return nil, ErrUnknownPlatform
	}
	return enumtext.Marshal(platformNames[:], p, "Platform", ErrUnknownPlatform)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String
// returns, except "unknown".
func (p *Platform) UnmarshalText(text []byte) error {
	v, err := enumtext.Parse[Platform](platformNames[:], text, "Platform", ErrUnknownPlatform)
	if err == nil && v == PlatformUnknown {
		err = ErrUnknownPlatform
	}
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Header returns the header the platform's edge reports the client in
// when it connects to the service itself ([Direct]), in its usual
// spelling: "CF-Connecting-IP", "Fastly-Client-IP", "True-Client-IP",
// "Fly-Client-IP", or "X-Forwarded-For". Behind an ingress every preset
// reads X-Forwarded-For instead. It returns "" for PlatformUnknown.
func (p Platform) Header() string { return p.def().header }

// Ranges returns the platform's origin-facing ranges as the embedded,
// dated snapshot of the clientip/ranges package holds them (the floor a
// preset starts from): Cloudflare, CloudFront, Fastly, Azure Front Door and
// Google's load balancers. It is the empty set for the platforms that
// publish no list (Akamai, Fly.io, Cloud Run, Envoy), whose presets take
// your ranges instead. The set is shared and immutable.
func (p Platform) Ranges() clientip.PrefixSet {
	d := p.def()
	if d.snapshot == "" {
		return clientip.PrefixSet{}
	}
	s, _ := ranges.SnapshotNamed(d.snapshot)
	return s.Set
}

// Documentation returns the provider's pages the platform's preset rests
// on: where the header is documented, then where the ranges are. Each call
// returns a new slice.
func (p Platform) Documentation() []string { return slices.Clone(p.def().docs) }

// platformDef is what a Platform fixes.
type platformDef struct {
	header   string                // the header read in Direct, usual spelling
	snapshot string                // the ranges snapshot of the floor; "" for none
	source   func() *ranges.Source // the published list; nil for none
	hops     int                   // the walk's length in Direct: trusted hops + 1
	// needsRanges: no published list, Config.Ranges is required.
	needsRanges bool
	docs        []string
}

// Where the providers document what the presets rely on.
const (
	docCloudflareHeaders = "https://developers.cloudflare.com/fundamentals/reference/http-headers/"
	docCloudflareIPs     = "https://www.cloudflare.com/ips/"
	docCloudflareAOP     = "https://developers.cloudflare.com/ssl/origin-configuration/authenticated-origin-pull/"

	docCloudFrontXFF     = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/RequestAndResponseBehaviorCustomOrigin.html#RequestCustomIPAddresses"
	docCloudFrontRanges  = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/LocationsOfEdgeServers.html"
	docAWSIPRanges       = "https://docs.aws.amazon.com/vpc/latest/userguide/aws-ip-ranges.html"
	docCloudFrontHeaders = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/adding-cloudfront-headers.html"
	docCloudFrontCustom  = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/add-origin-custom-headers.html"
	docALBXFF            = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/x-forwarded-headers.html"

	docFastlyClientIP = "https://www.fastly.com/documentation/reference/http/http-headers/Fastly-Client-IP/"
	docFastlyXFF      = "https://www.fastly.com/documentation/reference/http/http-headers/X-Forwarded-For/"
	docFastlyIPs      = "https://www.fastly.com/documentation/reference/api/utils/public-ip-list/"

	docAkamaiOrigin = "https://techdocs.akamai.com/property-mgr/docs/origin-server"
	docAkamaiACL    = "https://techdocs.akamai.com/origin-ip-acl/docs/welcome"

	docAzureHeaders     = "https://learn.microsoft.com/en-us/azure/frontdoor/front-door-http-headers-protocol"
	docAzureVariables   = "https://learn.microsoft.com/en-us/azure/frontdoor/rule-set-server-variables"
	docAzureOrigin      = "https://learn.microsoft.com/en-us/azure/frontdoor/origin-security"
	docAzureServiceTags = "https://learn.microsoft.com/en-us/azure/virtual-network/service-tags-overview"

	docFlyHeaders = "https://fly.io/docs/networking/request-headers/"

	docGoogleXFF    = "https://cloud.google.com/load-balancing/docs/https#x-forwarded-for_header"
	docGoogleRanges = "https://cloud.google.com/load-balancing/docs/firewall-rules"

	docEnvoyXFF = "https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_conn_man/headers#x-forwarded-for"
	docEnvoyExt = "https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_conn_man/headers#x-envoy-external-address"
)

const xff = "X-Forwarded-For"

func (p Platform) def() platformDef {
	switch p {
	case Cloudflare:
		return platformDef{header: "CF-Connecting-IP", snapshot: "cloudflare", source: ranges.Cloudflare, hops: 1,
			docs: []string{docCloudflareHeaders, docCloudflareIPs}}
	case CloudFront:
		return platformDef{header: xff, snapshot: "aws-cloudfront-origin-facing", source: ranges.CloudFront, hops: 1,
			docs: []string{docCloudFrontXFF, docCloudFrontRanges, docAWSIPRanges}}
	case Fastly:
		return platformDef{header: "Fastly-Client-IP", snapshot: "fastly", source: ranges.Fastly, hops: 1,
			docs: []string{docFastlyClientIP, docFastlyXFF, docFastlyIPs}}
	case Akamai:
		return platformDef{header: "True-Client-IP", hops: 1, needsRanges: true,
			docs: []string{docAkamaiOrigin, docAkamaiACL}}
	case AzureFrontDoor:
		return platformDef{header: xff, snapshot: "azure-frontdoor-backend", hops: 1,
			docs: []string{docAzureHeaders, docAzureVariables, docAzureOrigin, docAzureServiceTags}}
	case Fly:
		return platformDef{header: "Fly-Client-IP", hops: 1, needsRanges: true,
			docs: []string{docFlyHeaders}}
	case GoogleLoadBalancer:
		return platformDef{header: xff, snapshot: "google-load-balancers", hops: 2,
			docs: []string{docGoogleXFF, docGoogleRanges}}
	case CloudRun:
		return platformDef{header: xff, hops: 1,
			docs: []string{docGoogleXFF}}
	case Envoy:
		return platformDef{header: xff, hops: 1, needsRanges: true,
			docs: []string{docEnvoyXFF, docEnvoyExt}}
	}
	return platformDef{}
}
