// Package presets bundles, for the edges people put in front of Go
// services, the three things a deployment must get right together: the
// header the edge reports the client in, the ranges the edge connects
// from, and the topology between them — with an edge-identity check where
// the ranges cannot tell your account from another customer's. It uses
// only the standard library, clientip and clientip/ranges.
//
// A preset is configured once:
//
//	p, err := presets.New(presets.Config{Platform: presets.Cloudflare, Topology: presets.Direct()})
//	trust, err := p.NewStore(clientip.StoreOptions{Logger: logger})      // every layer reads it
//	refresher, err := p.NewRefresher(trust, ranges.RefresherConfig{CacheFile: path})
//	go refresher.Run(ctx)                                                 // the ranges stay current
//	resolve, err := middleware.New(middleware.Config{Trust: trust})
//	mux.Handle("/", p.Handler(resolve(app)))                              // edge identity, then the client
//
// [Preset.Config] is the plain [clientip.Config] for a static resolver.
//
// # Threat model
//
// A header that names a client is believed only from a hop inside the
// trusted set, and the first address outside it is the client (see
// clientip). A preset decides that set and that header for one edge, and
// fails closed where the edge leaves a gap:
//
//   - Only the edge's ranges. Direct, the edge's header is read only from
//     a socket peer inside its published origin-facing ranges (or the ones
//     you give, where the provider publishes none: there is no preset that
//     trusts everyone, and none with an empty set). Anyone else is the
//     client, whatever it sent.
//   - Ranges identify an edge, not your account on it. Every Cloudflare
//     zone, CloudFront distribution, Fastly service and Front Door profile
//     connects from the same addresses, an attacker's included, and an
//     attacker's edge configuration can put what it likes in headers it
//     forwards. Azure Front Door's X-Azure-FDID is required for that reason
//     ([Config].FrontDoorIDs); any preset takes a shared-secret header
//     ([SharedSecret]) set by your edge configuration. Both are checked by
//     [Preset.Check] with typed errors, before the client is used.
//     Cloudflare's own answer is authenticated origin pulls (mutual TLS:
//     https://developers.cloudflare.com/ssl/origin-configuration/authenticated-origin-pull/),
//     configured in your TLS server, not here.
//   - A single header through an ingress proves nothing. Behind an
//     ingress ([BehindIngress]), the edge's CF-Connecting-IP (or
//     Fastly-Client-IP, True-Client-IP, Fly-Client-IP) reaches the service
//     the same way whether the edge wrote it or a client that reached the
//     ingress directly did. The preset walks X-Forwarded-For instead, where
//     the ingress records the address it received the connection from: an
//     edge address is stepped over, anything else is the client.
//   - Only headers the edge writes itself. A preset reads a single-address
//     header only where the provider documents that its edge sets it from
//     the connection it received; where the provider documents that a
//     client's value can come through, it reads X-Forwarded-For, to which
//     the edge appends the address of the connection. That is why Azure
//     Front Door, CloudFront and Envoy presets read X-Forwarded-For (see
//     below).
//   - The edge must be configured as its documentation says. A preset
//     cannot see the edge's settings. Each platform below names the ones
//     it relies on; an edge that forwards a client's header untouched, or
//     an ingress that does not append to X-Forwarded-For, makes any preset
//     believe a client.
//
// # Platforms
//
//	platform             Direct reads         ranges (refreshed from)                 identity
//	cloudflare           CF-Connecting-IP     snapshot (ranges.Cloudflare)            secret; mTLS
//	cloudfront           X-Forwarded-For      snapshot (ranges.CloudFront)            secret
//	fastly               Fastly-Client-IP     snapshot (ranges.Fastly)                secret
//	akamai               True-Client-IP       yours (your CIDR list, if any)          secret
//	azure-front-door     X-Forwarded-For      snapshot (ranges.AzureFrontDoor(loc))   X-Azure-FDID, secret
//	fly                  Fly-Client-IP        yours                                   secret
//	google-load-balancer X-Forwarded-For      snapshot + your forwarding rules        secret
//	cloud-run            X-Forwarded-For      none: hop count, no peer check          secret
//	envoy                X-Forwarded-For      yours                                   secret
//
// Behind an ingress every preset reads X-Forwarded-For, with the ingress's
// addresses trusted beside the edge's.
//
// Cloudflare sets CF-Connecting-IP to the address that connected to it
// (https://developers.cloudflare.com/fundamentals/reference/http-headers/)
// and connects from the ranges at https://www.cloudflare.com/ips/. With
// Pseudo IPv4 set to overwrite headers, the header holds an address from
// 240.0.0.0/4 for IPv6 clients; the preset returns it as it is.
//
// CloudFront appends the viewer's address, from the TCP connection, to
// X-Forwarded-For on every request
// (https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/RequestAndResponseBehaviorCustomOrigin.html#RequestCustomIPAddresses)
// and connects from the CLOUDFRONT_ORIGIN_FACING ranges
// (https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/LocationsOfEdgeServers.html).
// The preset does not read CloudFront-Viewer-Address: CloudFront adds it
// only when an origin request policy asks for it
// (https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/adding-cloudfront-headers.html),
// so a policy that forwards all viewer headers without it delivers a
// viewer's own; and its IPv6 form, address and port without brackets, is
// read correctly only by a parser that knows the port is always there,
// which clientip's single-address headers do not assume. CloudFront + ALB
// is BehindIngress with the ALB's subnets as the ingress; keep the ALB's
// routing.http.xff_header_processing.mode at append, its default
// (https://docs.aws.amazon.com/elasticloadbalancing/latest/application/x-forwarded-headers.html).
// AWS's way to prove the distribution is yours is a custom origin header
// (https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/add-origin-custom-headers.html):
// a [SharedSecret].
//
// Fastly adds Fastly-Client-IP when a request has none, and keeps it
// across shield POPs, but uses a client's own value when one is sent
// (https://www.fastly.com/documentation/reference/http/http-headers/Fastly-Client-IP/):
// set it in vcl_recv as that page shows (if (fastly.ff.visits_this_service
// == 0 && req.restarts == 0) { set req.http.Fastly-Client-IP = client.ip; }),
// or in your Compute code, before relying on this preset. Fastly appends
// to X-Forwarded-For only on TLS connections
// (https://www.fastly.com/documentation/reference/http/http-headers/X-Forwarded-For/),
// so behind an ingress serve the service over TLS only. Ranges:
// https://www.fastly.com/documentation/reference/api/utils/public-ip-list/.
//
// Akamai sends True-Client-IP when the Origin Server behavior enables it,
// and refuses a client's value unless "Allow Clients To Set True Client IP
// Header" is on (https://techdocs.akamai.com/property-mgr/docs/origin-server):
// enable the first, leave the second off. Akamai publishes the addresses
// its servers contact your origin from only to you, through Origin IP ACL
// (https://techdocs.akamai.com/origin-ip-acl/docs/welcome) or Site Shield,
// so Ranges is required. Akamai does not document how its servers write
// X-Forwarded-For across its tiers; before using BehindIngress, check with
// the explain package what your origin receives.
//
// Azure Front Door appends the client's socket address to X-Forwarded-For
// (https://learn.microsoft.com/en-us/azure/frontdoor/front-door-http-headers-protocol).
// The preset does not read X-Azure-ClientIP: Microsoft documents that it
// is taken from a client's X-Forwarded-For when there is one
// (https://learn.microsoft.com/en-us/azure/frontdoor/rule-set-server-variables,
// client_ip), so any client chooses it. Its ranges are the
// AzureFrontDoor.Backend service tag, shared by every Front Door profile;
// Microsoft's way to restrict an origin to yours is X-Azure-FDID
// (https://learn.microsoft.com/en-us/azure/frontdoor/origin-security),
// required here.
//
// Fly.io's proxy sets Fly-Client-IP to the client it accepted the
// connection from (https://fly.io/docs/networking/request-headers/).
// Fly.io publishes no list of the addresses its proxy connects to your
// machines from: give the ones your machines see as Ranges.
//
// Google's external Application Load Balancer appends the client's
// address and then its forwarding rule's address to X-Forwarded-For
// (https://cloud.google.com/load-balancing/docs/https#x-forwarded-for_header),
// and its Google Front Ends connect from 35.191.0.0/16 and 130.211.0.0/22
// and two IPv6 ranges (https://cloud.google.com/load-balancing/docs/firewall-rules).
// Both are trusted, so ForwardingRules is required. The same ranges send
// health checks, which carry no X-Forwarded-For: serve the health-check
// path beside the resolving middleware, not behind it. The regional
// (Envoy-based) load balancers connect from your proxy-only subnet instead:
// give it as Ranges.
//
// Cloud Run hands a container requests from Google's front end, from
// addresses Google does not document, and a container cannot be reached
// any other way. Nothing can be checked at the socket, so the preset uses
// hop-count mode: the client is the rightmost X-Forwarded-For entry (the
// second from the right behind an ingress, such as a sidecar proxy), which
// Google's front end appends from the connection it received. Google
// documents X-Forwarded-For for its load balancers (the page above), not
// for Cloud Run; what this preset believes rests on Cloud Run's ingress,
// not on a check the service makes. Use a [SharedSecret] set by a load
// balancer in front if that is not enough.
//
// Envoy, as an edge proxy with use_remote_address: true (its
// documentation's advice for an edge) and skip_xff_append false, appends
// the address of the connection it received to X-Forwarded-For
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_conn_man/headers#x-forwarded-for).
// The preset does not read X-Envoy-External-Address: Envoy does not set or
// overwrite it for requests it considers internal
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_conn_man/headers#x-envoy-external-address),
// so a client inside your network can send its own. If a load balancer
// that appends to X-Forwarded-For sits in front of Envoy
// (xff_num_trusted_hops > 0), include its addresses in Ranges and raise
// MaxHops.
//
// # Live ranges
//
// [Preset.NewStore] keeps the edge's ranges in a [clientip.Store] as the
// range set named after the platform, beside the ingress and forwarding
// rules, and [Preset.NewRefresher] wires a [ranges.Refresher] to it
// (OnUpdate: store.SetRangesFunc(name)), starting from its disk copy or the
// embedded snapshot. What a stale or failed refresh does is the
// refresher's to say: it never empties the set, and a store never installs
// a set its resolver refuses.
//
// # Testing a deployment
//
// The published ranges are public addresses, which a test on loopback
// cannot connect from. Give the addresses your test's "edge" uses as
// Config.Ranges (and, to test refreshing, a Source that serves them) —
// the rest of the preset is the one production uses.
package presets
