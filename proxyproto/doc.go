// Package proxyproto accepts PROXY protocol v1 and v2 headers
// (https://www.haproxy.org/download/3.4/doc/proxy-protocol.txt) only from
// trusted load balancers, reads them with a deadline, validates them beyond
// what the parser checks, and hands each connection's layers to
// [github.com/sourceip/sourceip/clientip]. It also writes headers, for
// clients, test tools and small load balancers.
//
// It is built on github.com/pires/go-proxyproto's parser and formatter but not
// on its Listener, Conn or policies: nothing here depends on that package's
// process-wide defaults (DefaultPolicy, DefaultReadHeaderTimeout,
// V1AcceptIPv4InTCP6), and no other package of this module imports it.
//
// # Threat model
//
// A PROXY header is a claim: "the real client is this address". Anyone who can
// open a TCP connection can make that claim, so a header is believed only when
// the socket peer is a trusted upstream — the load balancers that terminate
// client connections and are the only ones able to reach the listener with a
// header. A header from any other peer is never believed: by default the
// connection is closed ([UntrustedClose]) and counted; [UntrustedIgnore]
// strips it and serves the peer as itself.
//
// # One chain, one trust set
//
// Which upstreams are trusted is not configured here. Config.Trust is the
// [clientip.Trust] of the chain the listener serves, the same value the
// resolver, the HTTP middleware and the connection listener read: a peer is
// a trusted upstream when the resolver in force trusts it as a proxy, by the
// walk's own test ([clientip.Resolver.TrustsPeer]). A header the listener
// believes is therefore always one the walk reads, and a load balancer the
// walk steps over is always one whose header is read. Config.Upstreams
// narrows the upstreams to some of the trusted proxies (a PROXY-speaking
// load balancer among proxies that write headers instead); a prefix in it
// that the resolver does not trust is a configuration error.
//
// With a [*clientip.Store] as Trust, the trust can change while the listener
// serves. The listener loads the resolver once per connection, judges the
// connection with it and hands it on with the connection: [ResolverFromConn]
// returns it, and the middleware package's NewListener resolves with it, so
// a connection finishes on the configuration it started with while the next
// one sees the change. Upstreams is intersected per connection, so a change
// that stops trusting a load balancer stops its headers at once.
//
// HTTP requests load the resolver anew, one load per request (the
// middleware package does), so a change reaches requests on connections
// already open. The listener's judgement of the socket peer, made when the
// connection arrived, still holds for the connection's lifetime
// ([Facts].PeerUntrusted, which clientip honours): a change that stops
// trusting a load balancer makes its open connections' requests name the
// load balancer, which fails closed; a change that starts trusting a peer
// applies to its next connection only. A peer that was not trusted when it
// connected (a direct client, or one whose header was discarded under
// [UntrustedIgnore], after which the bytes are its client's) is never
// stepped over on that connection, so a forwarding header its client wrote
// is never read as a proxy's report.
//
// A resolver in hop-count mode without TrustedProxies steps over any socket
// peer; the listener never takes that for naming an upstream. Such a chain's
// PROXY upstreams must be listed in Upstreams, and without them no header is
// believed.
//
// A trusted upstream must send a header ([HeaderlessRefuse], the default). The
// specification forbids guessing whether one is present (section 2): if a
// trusted load balancer's connection may or may not carry a header, a client
// whose connection happens to be relayed without one would be taken for the
// load balancer itself, and a client that can make the load balancer forward
// its bytes verbatim could smuggle a header of its own. [HeaderlessAllow]
// exists for load balancers whose health checks connect without a header;
// such connections are served with the load balancer as the peer, and clientip
// reports them as coming from a trusted hop with no client (ErrAllTrusted)
// rather than inventing one. List the PROXY load balancers in Config.Upstreams
// when the chain also trusts proxies that write forwarding headers: a
// connection from a listed upstream without a header carries its client's
// bytes as the load balancer relayed them, so the walk of an HTTP request on
// it ends at the load balancer ([Facts].NoHeaderFromUpstream) instead of
// reading an X-Forwarded-For its client wrote. Without Upstreams the listener
// cannot tell the load balancer from a proxy that writes the header, and such
// a request's header is read as that proxy's.
//
// Connections from peers outside the trusted set that send no header are
// direct clients and are served with their socket addresses. In Kubernetes,
// pods that dial a LoadBalancer Service's IP are short-circuited by kube-proxy
// and never pass the load balancer, so they arrive without a header. Under
// externalTrafficPolicy: Local they come from the pod's address: leave the pod
// network out of the trusted proxies and they are served as themselves. Under
// Cluster their node masquerades them, so they come from a node address; if
// the nodes are trusted upstreams (as they must be for the load balancer's
// headers to pass the node's SNAT), HeaderlessRefuse refuses them, and
// HeaderlessAllow serves them as the node, which clientip then flags as
// masqueraded. Setting the Service's ipMode to Proxy sends them through the
// load balancer instead.
//
// # Optional headers: health endpoints
//
// Some endpoints must answer with or without a header: a health endpoint
// probed by a load balancer that puts a PROXY header in front of its health
// checks (AWS NLB with proxy protocol v2 sends a v2 LOCAL header;
// HAProxy's check-send-proxy a v1 or v2 one) and by other checkers that send
// none, as kube-proxy's healthCheckNodePort is. Config.Untrusted set to
// [UntrustedIgnore], with Config.Headerless set to [HeaderlessAllow], is
// the listener's optional-header mode: a connection is served whether or not
// it starts with a header, and a header, when present, is read to its end
// under the same deadline, size limits and validation as any other and is
// never seen by the application. It is believed only from a peer
// the listener trusts; from any other peer it is discarded and the peer
// is served as itself. With no Trust, no header is ever
// believed, which is what a health endpoint wants: its answer does not
// depend on who asks. An invalid header still closes the connection, since
// after one there is no telling where the client's bytes begin.
//
// The specification's rule against guessing whether a header is present
// (section 2) protects receivers that believe headers; this mode keeps it
// where it matters, because only a trusted upstream's header is believed,
// and a trusted upstream that may or may not send one is exactly what
// HeaderlessAllow already admits. trafficpolicy.OptionalProxyHeader is this
// mode with no Trust.
//
// # Bounded header reads
//
// Each connection's header is read before Accept returns the connection: on
// the spot when it has already arrived (the usual case behind a load
// balancer), otherwise in a goroutine of its own under
// Config.ReadHeaderTimeout (default 5 s; the specification asks for at least
// 3 s to cover a TCP retransmit). A client
// that connects and sends nothing is closed at the deadline and never blocks
// Accept for anyone else; a v1 line with no CRLF in its first 107 bytes and a
// v2 header whose length field is over the limit are refused as soon as
// that is known, any other invalid header once it is complete (its version,
// command, family and addresses are checked then), or at the deadline; at
// most 107 bytes (v1) or 16+4096 bytes (v2) are read as header. Config.MaxHeaderBytes raises the v2 bound, up to the
// specification's 16+65535, for trusted upstreams only (a load balancer that
// forwards client certificates needs it); a connection gets a buffer larger
// than the default only when its v2 length field asks for one within that
// bound. A refused connection is closed, counted in [Listener.Stats] and
// reported to Config.OnReject with the peer, the reason and how long it took;
// it never reaches the application's accept loop. At most Config.MaxOnReject
// (default 64) callbacks run at once; a rejection beyond them is counted in
// Stats.Unreported instead, so a flood of refused connections cannot pile up
// goroutines behind a slow callback.
//
// # Pending budgets
//
// Each connection waiting for its header or for Accept holds a slot, and
// trusted proxies and untrusted peers draw on separate budgets, so that
// however many connections untrusted peers open, and however slowly they
// send, the load balancers keep capacity of their own. Config.MaxPending
// (default 4096) bounds the trusted proxies' connections (every proxy the
// Trust names, including those Config.Upstreams does not allow to send a
// header: an HTTP proxy beside a PROXY load balancer); while it is
// reached the listener stops accepting and the kernel's backlog holds the
// rest, which slows a load balancer down but refuses none of its clients.
// Config.MaxPendingUntrusted (default 1024) bounds the other peers', and
// Config.MaxPendingPerSource (default 64) any one untrusted IPv4 address or
// IPv6 /64 (the IPv4 address an IPv6 one carries, behind NAT64 say). An
// untrusted connection over either bound is closed on arrival
// with a reset, without a byte read: the listener fails closed rather than
// queueing it, and keeps accepting, so a trusted proxy's connection never
// waits in the backlog behind a flood of untrusted ones. Such connections are
// counted in Stats.Shed by [ShedReason] and not reported to Config.OnReject,
// whose per-connection cost a flood must not be able to multiply. Errors of
// the inner listener's Accept are counted in Stats.AcceptErrors and reported
// to Config.OnAcceptError; temporary ones (out of file descriptors) are
// retried with a back-off of 5 ms doubling to 1 s. Because the header is read before the
// connection is handed out, this listener suits protocols in which the client
// speaks first (TLS, HTTP, MQTT) or that sit behind a load balancer sending
// the header at once; a direct client of a server-first protocol that sends
// nothing for ReadHeaderTimeout is closed.
//
// # Validation
//
// On top of go-proxyproto's parser (spec-exact v1 syntax, v2 signature,
// version, command and family checks), a header is refused when its CRC32C
// TLV does not match (section 2.2.3), its UNIQUE_ID TLV is longer than 128
// bytes (2.2.5), its TLV vector is malformed, its family does not match its
// addresses or this stream connection (TCP4 with IPv6 text or the reverse,
// UDP, AF_UNIX), its SSL TLV breaks the rules listed on [SSL] (2.2.6) or
// appears twice, or its v2 length exceeds the listener's limit
// ([ErrHeaderTooLong]). IPv4-mapped addresses
// are unmapped. A LOCAL header (v2 command LOCAL, or v1 UNKNOWN) is accepted
// with the socket's own addresses, as section 2.2 requires; its address block
// and TLVs are discarded, so nothing a health check sends is ever exposed as a
// fact. Only a CRC32C TLV among them is read and verified, since section 2.2.3
// has the checksum cover the whole header whatever the command (a PROXY
// header whose command byte was corrupted into LOCAL fails it); it is looked
// for after the family's address block and, as AWS NLB health checks place it
// under family TCP4, right after the fixed part. Such a header names no client, and
// [Facts.Transport] says so (clientip.Transport.ProxyLocal): clientip then
// ends the walk at a trusted upstream (ErrAllTrusted, the upstream in
// Result.Via: an internal caller, as its health checks are) rather than step
// over it into a forwarding header, which a layer 4 load balancer never
// writes (HAProxy send-proxy and nginx proxy_protocol send v1 UNKNOWN for
// the connections they relay from clients on other address families, such as
// Unix sockets, not only for health checks).
//
// # Layers
//
// Every accepted connection is a [*Conn] whose [Facts] hold the socket peer
// (the load balancer), the header's source and destination, and its TLVs;
// [FactsFromConn] finds them under [crypto/tls.Conn] as well, and
// [Facts.Transport] is exactly clientip's input, to resolve with the resolver
// [ResolverFromConn] returns. For HTTP, set http.Server.ConnContext to
// [ConnContext] and resolve each request with the chain's Trust (the
// middleware package does), one load of its resolver per request. Conn.RemoteAddr returns the PROXY source,
// which is what code written for direct clients expects.
//
// Wrap TLS outside this listener — tls.NewListener(proxyLn, cfg) — since the
// header travels in clear text before the TLS handshake; the bytes of a
// ClientHello that arrive with the header are kept for the handshake.
//
// # TLS terminated at the load balancer: the SSL TLV
//
// A load balancer that terminates TLS itself can report what it learnt in a
// PP2_TYPE_SSL TLV (section 2.2.6): whether the client used TLS, the version
// and cipher, whether the client presented a certificate and whether it
// verified, the certificate's common name, and, from senders that support
// it, the certificate itself (PP2_SUBTYPE_SSL_CLIENT_CERT, DER).
// [TLVs.SSL] returns it as an [SSL], validated when the header was parsed.
// HAProxy sends it with send-proxy-v2-ssl or send-proxy-v2-ssl-cn, plus
// proxy-v2-options ssl-cipher, cert-sig and cert-key for the cipher and the
// algorithms of its own certificate; no HAProxy version forwards the
// certificate, the group or the signature scheme.
//
// Each of these is a claim of the load balancer, worth what the load balancer
// is: a [Listener] keeps TLVs only from a trusted upstream's PROXY command
// (never a LOCAL header's, never an untrusted peer's), so an SSL read from
// [Conn.Facts], [FactsFromConn] or [FactsFromContext] is one a trusted
// upstream sent. [ParseHeader] and [WriteHeader] know nothing of trust, and
// anyone can write an SSL TLV. A certificate is public; what makes it an
// identity is the client's proof that it holds the key, which only the load
// balancer's TLS handshake saw. A backend that admits clients on the SSL TLV
// must therefore refuse every connection that brings none: a direct client
// (which has no header, or whose header is never believed) did not pass the
// load balancer's handshake. And no address a client can send from may be in
// the listener's trusted upstreams, since from there it could write its own.
//
// To admit a client on it, strongest first:
//   - The load balancer forwards the certificate: check [SSL.CertVerified]
//     when it verifies clients too, verify the certificate against the
//     backend's own client CA with [SSL.VerifyCertificate], and take the
//     identity from the verified leaf. This holds the client to the backend's
//     CA even when the load balancer trusts more.
//   - It forwards only the common name (send-proxy-v2-ssl-cn): check
//     [SSL.CertVerified] and take [SSL].CN. The name is as good as the load
//     balancer's CA file: it names whoever holds a certificate with that
//     common name from any CA the load balancer trusts.
//
// A header carrying a certificate can pass the default 16+4096 bytes: set
// Config.MaxHeaderBytes for such load balancers.
package proxyproto
