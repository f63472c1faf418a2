// Package ranges reads, checks and keeps current the published address
// ranges of the edges people put in front of Go services — Cloudflare,
// CloudFront, Google Cloud, Azure Front Door, Fastly — and of any plain CIDR
// list, as [clientip.PrefixSet] values for a resolver's trusted proxies. It
// uses only the standard library and clientip.
//
// # Threat model
//
// A trusted set is a list of proxies whose forwarding headers are believed.
// A wrong list is therefore not a cosmetic error: a prefix that does not
// belong to the edge makes whoever sits there a trusted proxy, free to name
// any client address it likes — to your rate limits, audit logs and
// allowlists. Everything here follows from that:
//
//   - Only origin-facing ranges. A provider's list of the addresses its edge
//     connects to origins from is what a backend sees. Lists of addresses a
//     provider's customers can be assigned — all of AWS's ip-ranges.json,
//     Google's cloud.json, most Azure tags — contain the attacker's rented
//     machine; [AWSFilter] therefore requires a service, and the docs of
//     [ParseGoogleCloud] say what cloud.json is. The right sets are
//     Cloudflare's ips-v4/ips-v6, AWS's CLOUDFRONT_ORIGIN_FACING, Azure's
//     AzureFrontDoor.Backend, Fastly's public IP list, and Google's
//     documented load-balancer ranges ([GoogleLoadBalancerRanges]).
//   - Ranges identify an edge, not your account on it. Every Cloudflare zone
//     and every Front Door profile, an attacker's included, connects from the
//     same addresses. Pair range trust with an edge-identity check (Azure's
//     X-Azure-FDID, Cloudflare's authenticated origin pulls, a shared secret
//     header) where the platform offers one.
//   - Strict parsers. Every entry of a document is validated with
//     [net/netip] — host bits set, zones, bad lengths, the wrong family and
//     an HTML error page in place of a list are errors, not skipped lines —
//     and documents are bounded in size and in the prefixes they select
//     ([MaxPrefixes]). A document that is partly wrong is refused whole.
//   - Never everything, never nothing. A set holding 0.0.0.0/0 or ::/0, a
//     prefix wider than /8 (IPv4) or /16 (IPv6), an IPv6 prefix that stands
//     for every IPv4 host (NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo
//     2001::/32) or more than an IPv4 /8 of them, or reserved space is always
//     refused; private, loopback, link-local and CGNAT space unless allowed
//     ([CheckSet]). An empty, failed or unparseable fetch never replaces the
//     current set.
//   - Guards against gross change. A refresh that drops or adds more than a
//     configured fraction of the current address space ([Change]) is held
//     until an operator accepts it ([Refresher.AcceptPending]), and so is one
//     that takes the set further than a configured fraction past its
//     baseline — the snapshot, or the set an operator last accepted — so that
//     a feed growing a little at every refresh cannot grow without end
//     (MaxTotalGrowth, [ErrDrift]). This catches a truncated list, one
//     swapped for another provider's, or one inflated step by step; it
//     cannot catch one added prefix. For that, fetch only over https from the provider
//     itself (plain http is refused unless allowed, and so is a redirect
//     from https to http).
//   - A floor that ships. Each common source has a dated [Snapshot] embedded
//     in the package; a refresher starts from its last-good disk copy, else
//     from the snapshot, and says which ([Provenance]) and how old it is.
//
// # Sources and their documentation
//
//   - Cloudflare ([Cloudflare]): https://www.cloudflare.com/ips-v4 and
//     https://www.cloudflare.com/ips-v6, listed at
//     https://www.cloudflare.com/ips/. Client in CF-Connecting-IP:
//     https://developers.cloudflare.com/fundamentals/reference/http-headers/.
//   - CloudFront ([CloudFront]): the CLOUDFRONT_ORIGIN_FACING entries of
//     https://ip-ranges.amazonaws.com/ip-ranges.json
//     (https://docs.aws.amazon.com/vpc/latest/userguide/aws-ip-ranges.html,
//     https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/LocationsOfEdgeServers.html).
//     Client: the X-Forwarded-For entry CloudFront appends (clientip refuses
//     CloudFront-Viewer-Address, whose IPv6 form cannot be split from its
//     port): https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/adding-cloudfront-headers.html.
//     Other AWS services and regions: [NewSource] with ProviderAWS.
//   - Google Cloud load balancers ([GoogleLoadBalancerRanges]):
//     35.191.0.0/16, 130.211.0.0/22, 2600:2d00:1:b029::/64 and
//     2600:2d00:1:1::/64, published only in
//     https://cloud.google.com/load-balancing/docs/firewall-rules and
//     https://cloud.google.com/load-balancing/docs/health-check-concepts#ip-ranges.
//     Client appended to X-Forwarded-For:
//     https://cloud.google.com/load-balancing/docs/https#x-forwarded-for_header.
//   - Google Cloud customer ranges ([NewSource] with ProviderGoogleCloud):
//     https://www.gstatic.com/ipranges/cloud.json
//     (https://cloud.google.com/compute/docs/faq#find_ip_range) — not proxies.
//   - Azure Front Door ([AzureFrontDoor]): tag AzureFrontDoor.Backend of the
//     weekly ServiceTags_Public_YYYYMMDD.json linked from
//     https://www.microsoft.com/en-us/download/details.aspx?id=56519
//     (https://learn.microsoft.com/en-us/azure/virtual-network/service-tags-overview,
//     https://learn.microsoft.com/en-us/azure/frontdoor/origin-security). Its
//     URL changes every week, so the source reads a file or URL you keep
//     current. Client appended to X-Forwarded-For (X-Azure-ClientIP is
//     taken from a client's X-Forwarded-For), profile in X-Azure-FDID:
//     https://learn.microsoft.com/en-us/azure/frontdoor/front-door-http-headers-protocol.
//   - Fastly ([Fastly]): https://api.fastly.com/public-ip-list
//     (https://www.fastly.com/documentation/reference/api/utils/public-ip-list/).
//     Client in Fastly-Client-IP:
//     https://www.fastly.com/documentation/reference/http/http-headers/Fastly-Client-IP/.
//   - Any plain CIDR list, file or URL ([NewSource] with ProviderCIDRList,
//     [ParseCIDRList]).
//
// # Snapshots
//
// The embedded snapshots and their dates ([Snapshots], [Source.Snapshot]):
//
//	name                           date (UTC)            prefixes   what the date is
//	aws-cloudfront-origin-facing   2026-08-22 15:17:05   49         published (syncToken)
//	azure-frontdoor-backend        2025-07-22 14:30:28   170        first fetched by the mirror
//	cloudflare                     2025-07-25 07:30:34   22         fetched by the mirror
//	fastly                         2025-07-25 07:30:34   21         fetched by the mirror
//	google-cloud                   2025-07-25 02:16:28   782        published (syncToken)
//	google-load-balancers          2026-12-03            4          documentation read
//
// They were taken from public mirrors that commit the providers' documents
// (github.com/femueller/cloud-ip-ranges, github.com/seligman/aws-ip-ranges);
// each Snapshot names its mirror, commit and file, and snapshots/README.md
// says how each file differs from the provider's whole document.
//
// # Keeping a set current
//
// A [Refresher] fetches a [Source] on an interval with jitter, with
// conditional requests (ETag / If-None-Match, Last-Modified /
// If-Modified-Since), a timeout covering the whole body and a size limit.
// [Refresher.Current] serves the set without locks or allocation; OnUpdate
// pushes each accepted set into a trust store — a [clientip.Store], which
// every layer of the chain reads, with OnUpdate: store.SetRangesFunc(name),
// so the set joins the trusted proxies configured by hand and each change
// is logged under its name; [Refresher.Status] reports the
// provenance, age, last success, last error, prefix count and counters that a
// metrics exporter turns into gauges and counters; [Refresher.Check] and
// [Refresher.HealthHandler] give probes a staleness verdict — the only place
// where staleness is a failure, and only with the maximum age you choose.
// The data a refresher serves never expires by itself.
package ranges
