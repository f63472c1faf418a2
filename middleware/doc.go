// Package middleware puts [github.com/sourceip/sourceip/clientip] to work in
// servers: HTTP middleware that resolves each request's client, a [Policy]
// that admits or refuses clients by their resolved address per route, MQTT
// topic or gRPC method, and a listener wrapper that resolves each connection
// of protocols without per-request headers (MQTT, raw TCP).
//
// # HTTP
//
// There are two ways to hand the client to handlers, and a server uses one:
//
//   - Resolve on demand, without copying requests. Set
//     http.Server.ConnContext to [ConnContext](trust): it attaches the trust
//     and the connection's layers (the socket peer read from its
//     *net.TCPAddr, or a proxyproto.Listener's PROXY layer and Facts) once
//     per connection. Handlers call [clientip.FromRequest](r), which finds
//     them with one context lookup and resolves, without allocating;
//     [RequireClient] refuses unresolvable chains with 400, a [Policy]'s
//     Handler refuses clients by rule, and ratelimit.HTTP limits them, each
//     passing the request on unchanged and holding its resolution for the
//     handlers it runs ([clientip.HoldRequest]), so that their FromRequest
//     does not walk the chain again. A direct client's answer is kept by its
//     connection. It is the faster way: see PERFORMANCE.md.
//   - Resolve once and store the Result. [New] returns a middleware with
//     the func(http.Handler) http.Handler shape that chi, gorilla/mux and
//     plain net/http chains use: it resolves each request under the
//     configured [clientip.Trust], stores the [clientip.Result] in a shallow
//     copy of the request's context (read it with [clientip.FromContext],
//     or clientip.FromRequest, which returns it), and can rewrite
//     r.RemoteAddr for legacy code ([Config].SetRemoteAddr). Use it when
//     handlers should see the one Result the request was judged by, when
//     the server's ConnContext is not yours to set, or for SetRemoteAddr.
//     It costs a request copy (about 200 ns and two allocations).
//
// Either way, a request whose chain cannot be resolved is refused with 400
// Bad Request and a short plain-text reason (or by [Config].OnError), never
// served with a guess, and the caller's request is never modified. A server
// whose connections carry no trust (ConnContext not set) is refused with 500
// by the on-demand middlewares: a wiring mistake is loud, not a silent
// fallback to the socket peer. Frameworks with their own handler types (gin,
// echo) call clientip.FromRequest, or trust.Resolver().ResolveRequest, on
// their *http.Request.
//
// Behind a PROXY-protocol load balancer, serve from a proxyproto.Listener;
// ConnContext reads its PROXY layer (with [New] alone, set
// http.Server.ConnContext to proxyproto.ConnContext instead).
//
// # One chain, one trust set
//
// Every layer of a chain reads one [clientip.Trust]: give the same value to
// proxyproto.Config.Trust, [ConnContext] (or [Config].Trust) and
// [NewListener]. A *clientip.Resolver is a static Trust; a *clientip.Store
// changes while the server runs (new load balancers, a CDN's refreshed
// ranges). Each resolution loads the resolver once and walks under it from
// start to end, so a change never splits one walk between two
// configurations: behind [New] that is one resolution per request; resolving
// on demand, a policy and a handler of the same request each load the
// resolver in force, and see the same one unless a change lands between
// them. Each connection through [NewListener] is resolved with the resolver
// the PROXY listener judged it with, and the walk always honours that
// listener's judgement of the peer (clientip.Transport.PeerUntrusted).
//
// # Origin
//
// [NewOrigin], mounted inside [New], reads the scheme, host, port and path
// prefix the client used (a [clientip.OriginReader] decides which headers,
// and only those written by the trusted hop that reported the client) and
// stores the [clientip.Origin] in the context; with [OriginConfig].Apply the
// next handler sees it in the request copy's URL and Host, for redirects
// and http.CrossOriginProtection. [ReadOrigin] reads it without storing or
// applying it, and believes a PROXY header's SSL TLV about TLS the load
// balancer terminated for the client it reported.
//
// # Policy
//
// A [Policy] is the application's loadBalancerSourceRanges with rules per
// target: allow and deny lists ([clientip.PrefixSet]) per ServeMux pattern,
// chi route (through a route function; this package does not import chi),
// gRPC method or MQTT topic filter. The first matching rule decides (the
// most specific pattern, for ServeMux patterns), a target no rule matches
// gets the Default, whose zero value refuses everyone, and every decision
// names its rule ([Decision], [Denial]) for logs and metrics. Unresolved and
// masqueraded clients are refused unless the deciding rule says otherwise.
// [NewSourceRanges] is the one-rule case: an allowlist. Use
// [Policy.Handler] for HTTP in front of plain handlers, [Policy.Serve] where
// the policy guards the handler that uses the client (it hands over the
// resolution: the fastest way), and [Policy.Check] or [Policy.Decide] for MQTT
// (with [ResultFromConn]) and gRPC (grpcsourceip calls Check with the full
// method).
//
// # Connections
//
// [NewListener] wraps a listener, typically a proxyproto.Listener, so that each
// connection carries its resolution; [ResultFromConn] reads it back, through
// a *tls.Conn as well. Resolution failures travel with the connection instead
// of closing it, so that the server can refuse in its own protocol, by a
// Policy's rule for the MQTT topic or the operation. A connection resolved
// from something else, such as the HTTP request a WebSocket was upgraded
// from, carries its resolution with [WithResult].
//
// # Observation
//
// An [Observer] is told of each resolution and each denial, and, when it is
// a [DecisionObserver], of each policy decision with its rule: the
// otelsourceip subpackage turns them into span attributes and metrics,
// [LogObserver] into one log line each. [Log] and [Attrs] write the same line
// from code that resolves connections itself; [OutcomeOf] classifies errors
// into a fixed set of names fit for metric attributes.
//
// # Threat model
//
// The middleware adds no trust decision of its own: whom to believe is the
// resolver's configuration, and which PROXY headers are read is the
// proxyproto listener's. What it adds is that the decision is made once, in
// one place, before any handler runs; that a failure is a refusal and not a
// fallback to the peer or to the leftmost X-Forwarded-For entry; that a
// masqueraded result is carried with its flag so policies can refuse it; and
// that error responses never echo what a client wrote.
//
// Requests in which every hop is trusted (a health check from a node inside
// the trusted range, say) have no client and get 400 by default. Mount such
// endpoints outside the middleware, answer them in Config.OnError, or give
// them a Policy rule with AdmitInternal.
package middleware
