// Package clientip resolves the address of the client on the other end of a
// connection or request, says where the answer came from, and refuses to guess
// when the path to the client cannot be trusted.
//
// # One chain, one trust set
//
// An address reaches a backend through layers that may each replace it. The
// backend sees them innermost first: the socket peer (the kernel's truth), then
// the source of a PROXY protocol header if a trusted upstream sent one, then the
// entries proxies wrote into a forwarding header, read from the right:
//
//	[ header hop n … header hop 1 ] [ PROXY source ] [ socket peer ]   ◄── walk
//
// A [Resolver] walks this chain from the socket peer outward. A hop whose
// address is in [Config].TrustedProxies is a proxy we believe, so the layer it
// delivered is read and the walk steps outward; the first hop outside the set
// is the client. A peer outside the set is the client, and whatever headers it
// sent are ignored. The answer is a [Result]: the canonical client address,
// its [Source], its hop, the proxy that reported it, and what the socket and
// PROXY layers showed. A failure's kind is a [Reason], the one list of them
// that other packages read with [ReasonOf].
//
// The trusted set is configured once per chain. A [Trust] is the value every
// layer reads: the resolver here, the proxyproto listener (which believes a
// PROXY header exactly from a peer [Resolver.TrustsPeer] trusts), the HTTP
// middleware and the connection listener. A *Resolver is a static Trust; a
// [Store] is one whose configuration is replaced while the service runs.
//
// # Changing trust while serving
//
// [Store.Resolver] is one atomic load, without a lock or an allocation;
// every layer loads it once per connection or request and finishes on it, so
// a change applies from the next connection or request and never splits one
// walk between two configurations (the proxyproto listener hands the
// resolver it judged a connection with to whoever resolves it).
// [Store.Swap] and [Store.Update] replace the configuration; a configuration
// [New] refuses is returned as an error and the one in force stays. Named
// range sets ([Store.SetRanges]) join Config.TrustedProxies: a refresher of
// a CDN's published ranges (package clientip/ranges, OnUpdate:
// store.SetRangesFunc("cloudflare")) and an ingress configured by hand live
// side by side. Every change is logged as one line with its diff ([Change]):
// prefixes added and removed, the header, hop counts, limits.
//
// # HTTP requests
//
// [Resolver.ResolveRequest] resolves an *http.Request, reading the socket
// peer from r.RemoteAddr. A server that resolves on demand attaches the trust
// and the connection's layers once per connection instead ([NewConnContext];
// the middleware package's ConnContext is the http.Server.ConnContext that
// does it, PROXY layer included), and [FromRequest] then resolves a request
// with one context lookup and no parse: a direct client's answer is computed
// once per connection, and a middleware that judged the request holds its
// resolution for the handlers it runs ([HoldRequest]). A request whose
// context carries no trust is refused with [ErrNoTrust], never resolved
// under a guess.
//
// # Threat model
//
// Anyone can send any header, and anyone who can reach a PROXY-protocol port
// can send a PROXY header. Only proxies we trust are believed, and each is
// believed only about the hop directly outside it. In particular:
//
//   - A client talking to the backend directly cannot inject an address: its
//     socket address is not trusted, so no header is read.
//   - A client behind trusted proxies can write anything at the left of
//     X-Forwarded-For, but the walk stops at the entry the outermost trusted
//     proxy wrote. The leftmost entry is never used.
//   - An entry that cannot be read where the walk needs it (garbage, a host
//     name, a CIDR, leading-zero octets, a zone anywhere but on a link-local
//     address, 0.0.0.0, an "unknown" or obfuscated RFC 7239 node) stops the
//     walk with a typed error. It is never skipped, and the peer is never
//     passed off as the client instead.
//   - Matching is done on canonical addresses (IPv4-mapped unmapped, zones
//     ignored), so ::ffff:10.0.0.1 cannot slip past 10.0.0.0/8 in either
//     direction. A link-local X-Forwarded-For entry may carry the zone Go's
//     httputil.ReverseProxy writes ("fe80::5%eth0"): it is checked and
//     dropped, and a client never carries one (see [Config].Header).
//   - Hostile input is bounded: a header larger than Config.MaxHeaderBytes is
//     refused before it is parsed, and the walk stops after Config.MaxHops.
//   - Under Kubernetes externalTrafficPolicy: Cluster the node rewrites the
//     source to its own address. Listing node addresses in Config.Masquerade
//     turns such results into ErrMasqueraded, so a node address is never
//     silently used as a client identity for rate limits, audit logs or
//     allowlists.
//
// What this package cannot protect against: a trusted proxy that forwards a
// client's header unchanged instead of appending to it, a trusted set that
// contains addresses clients control (a CDN whose customers include your
// attackers, a shared cloud range), and single-address headers from an edge
// that does not overwrite them.
//
// # Choosing a configuration
//
//   - Clients connect directly: the zero Config. Every answer is the socket peer.
//   - Behind a load balancer that sends PROXY protocol: TrustedProxies = the
//     load balancer's addresses, no Header; wrap the listener with the
//     proxyproto package, given the same Trust, so the PROXY source reaches
//     [Transport].Proxy.
//   - Behind reverse proxies that append X-Forwarded-For (nginx
//     proxy_add_x_forwarded_for, most ingress controllers): TrustedProxies =
//     the proxies' addresses, Header = "X-Forwarded-For".
//   - Behind proxies that write RFC 7239: Header = "Forwarded".
//   - Behind a CDN that sets one header with the client (Cloudflare's
//     CF-Connecting-IP, Fly-Client-IP, …): TrustedProxies = the CDN's published
//     ranges, Header = that name; keep the ranges current with a refresher
//     of package clientip/ranges feeding a [Store].
//   - Behind proxies whose addresses change: TrustedHops = the number of proxies,
//     ideally with TrustedProxies naming at least the one the backend sees.
//   - Under externalTrafficPolicy: Cluster: Masquerade = the node addresses.
//
// # Origin and forwarding
//
// The same chain decides two more things a service behind proxies needs.
// An [OriginReader] reads the scheme, host, port and path prefix the client
// used (X-Forwarded-Proto, -Host, -Port, -Prefix, or the proto= and host= of
// a Forwarded element) from the headers written by the trusted hop that
// reported the client, never from the client, under strict syntax and an
// optional host allowlist; a direct client gets its own request's origin.
// A [Forwarder] is the other end: for a reverse proxy (httputil.ReverseProxy's
// Rewrite) it removes every incoming forwarding header and writes only what
// the walk verified, as X-Forwarded-For and RFC 7239 Forwarded.
//
// # Every hop trusted
//
// When every hop is trusted (a request from an internal host in the trusted
// range, or a proxy that reports a trusted address) there is no client to
// name: Resolve returns ErrAllTrusted. Returning the leftmost trusted address
// would let a client inside the trusted range forge its origin, and returning
// the peer would pass a proxy off as the client. The Result keeps the
// outermost trusted hop in Via for callers that deliberately serve internal
// origins.
//
// # Which error wins
//
// Resolve reports the first failure met walking outward from the socket peer,
// so an error names the hop nearest the backend that could not be stepped
// over, in [ChainError].Hop and [Result].Hop:
//
//   - The socket peer: ErrNoAddress (a Unix socket that is not trusted) or
//     ErrUnspecified. The PROXY source: ErrUnspecified. When a trusted
//     peer's PROXY header named no client ([Transport].ProxyLocal: v2 LOCAL,
//     v1 UNKNOWN, or no header at all from a load balancer listed as a
//     PROXY upstream), the walk ends at the peer as if no forwarding header
//     had come (ErrAllTrusted, below), whatever header follows: a layer 4
//     load balancer writes none, so it is the client's.
//   - The configured header, judged whole when the walk reaches it, at the
//     position of its first hop: ErrHeaderTooLarge beyond MaxHeaderBytes; for
//     Forwarded, ErrMalformed for a quoted string left open (no element
//     boundary after it can be known); for a single-address header,
//     ErrMultipleValues for a second line or a list.
//   - Each hop in turn: a hop beyond MaxHops is ErrTooManyHops, whatever it
//     holds; otherwise an entry that cannot be read is ErrMalformed,
//     ErrUnknownHop or ErrUnspecified; otherwise trust decides, and a client
//     in Masquerade is ErrMasqueraded.
//   - A walk that steps over every hop ends with ErrMasqueraded when the last
//     hop is a masquerading node (it says more: the client was lost to the
//     node), and otherwise with ErrTooFewHops in hop-count mode or
//     ErrAllTrusted.
//
// So with MaxHops 1 behind a PROXY load balancer, one X-Real-IP value from a
// trusted peer is ErrTooManyHops whether it is empty, garbage or an address,
// while a list or a second X-Real-IP line is ErrMultipleValues.
//
// # Explaining a resolution
//
// [Resolver.Explain] and [Resolver.ExplainRequest] answer like Resolve and
// ResolveRequest and tell how, as an [Explanation]: each hop with its
// address and the walk's [Verdict] on it (trusted, client, masqueraded,
// failed, unread), and the entries beyond where the walk stopped, which
// whoever sent the request may have forged. They run the same walk, with a
// trace on, so the explanation cannot drift from the answer; they allocate
// and are meant for diagnosis (the explain package serves them over HTTP).
//
// # Bounds on RFC 7239
//
// RFC 7239 sets no limit on the parameters of a Forwarded element. The walk
// reads at most 16 in an element it needs, and an element with more is
// ErrMalformed: the bound keeps the check for repeated parameters cheap on
// hostile input, and proxies write the four parameters the RFC defines and
// seldom any other. Nodes have no length limit: an obfuscated
// identifier of any length is ErrUnknownHop, and an address with an
// obfuscated port of any length is read.
//
// # Performance
//
// Resolve does not allocate on valid input. It reads a header only when the
// peer is trusted, reads X-Forwarded-For lazily from the right and stops at the
// client, and looks addresses up in a trie whose cost does not grow with the
// number of trusted prefixes.
//
// The package uses only the standard library (and the library's own internal
// enum-text helper, itself standard library only).
package clientip
