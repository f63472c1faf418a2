// Package middleware puts [github.com/sourceip/sourceip/clientip] to work in
// servers: an HTTP middleware that resolves each request's client once, a
// source-range policy that admits only configured client ranges, and a
// listener wrapper that resolves each connection of protocols without
// per-request headers (MQTT, raw TCP).
//
// # HTTP
//
// [New] returns a middleware with the func(http.Handler) http.Handler shape
// that chi, gorilla/mux and plain net/http chains use. It resolves the request
// under the configured [clientip.Trust], stores the [clientip.Result] in the
// request context (read it with [clientip.FromContext]) and passes a shallow
// copy of the request on; it never changes the caller's request, and leaves
// r.RemoteAddr alone unless [Config].SetRemoteAddr asks otherwise for legacy
// code. A request whose chain cannot be resolved is answered with 400 Bad
// Request and a short plain-text reason, or by [Config].OnError; it is never
// served with a guess. Frameworks with their own handler types (gin, echo)
// call trust.Resolver().ResolveRequest on their *http.Request instead.
//
// Behind a PROXY-protocol load balancer, serve from a proxyproto.Listener and
// set http.Server.ConnContext to proxyproto.ConnContext, so the connection's
// PROXY source reaches the resolver.
//
// # One chain, one trust set
//
// Every layer of a chain reads one [clientip.Trust]: give the same value to
// proxyproto.Config.Trust, [Config].Trust and [NewListener]. A
// *clientip.Resolver is a static Trust; a *clientip.Store changes while the
// server runs (new load balancers, a CDN's refreshed ranges). Each request
// loads the resolver once and is resolved under it from start to end; each
// connection through [NewListener] is resolved with the resolver the PROXY
// listener judged it with, so a change never splits one connection's walk
// between two configurations, and the next connection or request sees it.
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
// # Source ranges
//
// [SourceRanges] is the application's loadBalancerSourceRanges: it admits
// clients whose resolved address is in its allowed set and refuses with 403,
// or through [SourceRanges.Check] for non-HTTP code, clients that are outside
// it, that could not be resolved, or whose address is a masquerading node.
//
// # Connections
//
// [NewListener] wraps a listener, typically a proxyproto.Listener, so that each
// connection carries its resolution; [ResultFromConn] reads it back, through
// a *tls.Conn as well. Resolution failures travel with the connection instead
// of closing it, so that the server can refuse in its own protocol. A
// connection resolved from something else, such as the HTTP request a
// WebSocket was upgraded from, carries its resolution with [WithResult].
//
// # Observation
//
// An [Observer] is told of each resolution and each denial: the
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
// endpoints outside the middleware, or answer them in Config.OnError.
package middleware
