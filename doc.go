// Package sourceip is the root of an SDK for trusted client-address
// extraction and policy-aware backends. It holds no code; start from one of
// its packages:
//
//   - [github.com/sourceip/sourceip/clientip] resolves who is really on the
//     other end of a connection or request from the socket peer, a PROXY
//     protocol source and forwarding headers (X-Forwarded-For, RFC 7239
//     Forwarded, or one single-address header) under one configured trust
//     set, and says where the answer came from. Its Trust is the one source
//     of that set every other layer reads, and its Store changes it while
//     serving. It also reads the origin (scheme, host, port, prefix) from the
//     hop that reported the client and rebuilds forwarding headers for the
//     next hop from the verified chain. Start here.
//   - [github.com/sourceip/sourceip/clientip/ranges] reads and keeps current
//     the published origin-facing ranges of CDNs and clouds (Cloudflare,
//     CloudFront, Google Cloud load balancers, Azure Front Door, Fastly) as
//     trusted-proxy sets, with dated snapshots as the floor, and feeds them
//     into a running clientip.Store.
//   - [github.com/sourceip/sourceip/clientip/presets] configures one edge
//     (Cloudflare, CloudFront, Fastly, Akamai, Azure Front Door, Fly.io,
//     Google Cloud load balancers, Cloud Run, Envoy) in one step: the header
//     it writes, its ranges kept current, the topology (direct, or through
//     an ingress), and its identity (Front Door ID, shared secret). Start
//     here if a CDN or a cloud load balancer is in front of you.
//   - [github.com/sourceip/sourceip/proxyproto] accepts PROXY protocol v1 and v2
//     only from trusted load balancers, with a header deadline, TLV access and
//     validation, and hands each connection's layers to clientip.
//   - [github.com/sourceip/sourceip/middleware] resolves once per HTTP request
//     (net/http and chi), enforces source-range policies, and resolves per
//     connection for MQTT and raw TCP.
//   - [github.com/sourceip/sourceip/ratelimit] limits events per resolved
//     client with token buckets in bounded memory, as net/http middleware
//     with the IETF RateLimit fields, and through a Store shared by the
//     replicas of a service (Redis/Valkey: the ratelimit/redisstore module).
//   - The grpcsourceip module (github.com/sourceip/sourceip/grpcsourceip, a
//     module of its own so that gRPC stays out of this one) resolves each
//     gRPC call from the peer, the PROXY layer and the forwarding metadata,
//     with the same policies, rate limits and OpenTelemetry attributes.
//   - [github.com/sourceip/sourceip/trafficpolicy] models Kubernetes Service
//     traffic policies: what a backend sees under externalTrafficPolicy Local
//     and Cluster, a health server compatible with kube-proxy's
//     healthCheckNodePort, and a load-balancer-style prober.
//
// # Threat model
//
// A backend behind CDNs, reverse proxies and load balancers does not see its
// clients: the socket address is the last proxy, a load balancer may replace it
// and send a PROXY header, a Kubernetes node may masquerade it, and any client
// can forge the left end of X-Forwarded-For. The SDK believes a layer only when
// the hop that delivered it is a configured trusted proxy, walks the layers from
// the socket outward, and stops at the first untrusted hop. When the chain
// cannot be read (a malformed or unknown hop, too few or too many hops, every
// hop trusted) it returns a typed error instead of a guess, and a result that
// lands on a masquerading node address is flagged so it is never used as a
// client identity. PROXY headers are refused from untrusted peers and required
// from trusted ones, with bounded header reads.
//
// # One chain, one trust set
//
// Every layer of a chain reads one clientip.Trust: the PROXY listener
// (proxyproto.Config.Trust), the HTTP middleware (middleware.Config.Trust),
// the connection listener (middleware.NewListener) and the code that calls
// the resolver. A PROXY header is therefore believed exactly from the
// proxies the walk steps over, never from a second list that drifted apart
// from the first. A clientip.Store makes that trust live: a swap is
// validated before it is installed and logged as a diff, each connection
// and request is judged and resolved under the one configuration it
// started with, and provider ranges kept current by clientip/ranges join
// the ranges configured by hand.
package sourceip
