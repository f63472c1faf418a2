// Package otelsourceip reports sourceip's decisions to OpenTelemetry: the
// resolved client and the socket peer as span attributes, and counters of
// resolutions, masquerade detections, PROXY protocol refusals and policy
// decisions and denials, by the rule that made them. It uses only the OpenTelemetry API (go.opentelemetry.io/otel,
// /metric and /trace) and semantic conventions v1.43.0; the application
// chooses the SDK and exporters.
//
// # Wiring
//
// [New] takes a MeterProvider and a TracerProvider ([WithMeterProvider],
// [WithTracerProvider]) and defaults to the global ones. An [Instrumentation]
// is a [middleware.Observer], its ObserveProxyRejection method fits
// proxyproto.Config.OnReject, [Instrumentation.ObserveListener] exports
// a PROXY listener's own counters, [Instrumentation.ObserveStore] a trust
// store's changes and [Instrumentation.ObserveRefresher] a range
// refresher's state:
//
//	inst, err := otelsourceip.New()
//	pl, err := proxyproto.NewListener(inner, proxyproto.Config{Trust: trust, OnReject: inst.ObserveProxyRejection})
//	reg, err := inst.ObserveListener("mqtt", pl) // reg.Unregister() after pl.Close()
//	reg, err = inst.ObserveStore("mqtt", trust)  // trust a *clientip.Store
//	reg, err = inst.ObserveRefresher("cloudflare", refresher)
//	resolve, err := middleware.New(middleware.Config{Trust: trust, Observer: inst})
//	policy, err := middleware.NewPolicy(middleware.PolicyConfig{Rules: rules, Observer: inst})
//
// For connections resolved with middleware.NewListener, call
// inst.ObserveResolve with the connection's context and the values of
// middleware.ResultFromConn.
//
// # Spans
//
// The Instrumentation starts no span for requests: it annotates the span in
// the context it is given, normally the server span of otelhttp or of the
// application's own instrumentation, and does nothing when there is none.
// [SpanAttributes] lists what it sets: client.address and client.port for the
// resolved client (client.address empty when there is none),
// network.peer.address and network.peer.port for the socket peer, and
// sourceip.source, sourceip.outcome, sourceip.hop, sourceip.header,
// sourceip.via, sourceip.proxy.address, sourceip.proxy.port and
// sourceip.masqueraded for the rest of the chain. A policy decision adds
// sourceip.rule and sets client.address (and client.port) to the client the
// policy judged, and a denial adds sourceip.reason. The one span it records itself is
// sourceip.proxyproto.reject, for connections a PROXY listener refused, which
// never reach a handler.
//
// # Metrics
//
// All counters are Int64Counters; their attributes take a small fixed set of
// values and never hold an address:
//
//	sourceip.resolutions            {resolution}  sourceip.source, sourceip.outcome
//	sourceip.masquerade.detections  {detection}   sourceip.source
//	sourceip.proxyproto.rejections  {connection}  sourceip.reason (a proxyproto.Reason)
//	sourceip.policy.denials         {denial}      sourceip.source, sourceip.reason (not_allowed, unresolved, masqueraded), sourceip.rule
//	sourceip.policy.decisions       {decision}    sourceip.rule, sourceip.outcome (resolved: admitted; not_allowed, unresolved, masqueraded)
//
// sourceip.rule is the name of the middleware.Policy rule that decided: rule
// names are configuration, so there are as many values as rules (at most
// MaxRules; beyond that OverflowRule). Denials reported without a rule (an
// error that is not a *middleware.Denial) carry no sourceip.rule.
//
// and, per listener given to ObserveListener, read from its Stats when the
// meter collects (asynchronous instruments, each with sourceip.listener when
// a name is given):
//
//	sourceip.proxyproto.shed           {connection}  sourceip.reason (untrusted_budget, source_budget)
//	sourceip.proxyproto.accept_errors  {error}
//	sourceip.proxyproto.pending        {connection}  sourceip.trusted (an up-down counter)
//	sourceip.proxyproto.unreported     {connection}
//
// and, per trust store given to ObserveStore (sourceip.store when named) and
// per range refresher given to ObserveRefresher (sourceip.ranges when named):
//
//	sourceip.trust.swaps                   {change}   sourceip.result (changed, unchanged, refused)
//	sourceip.ranges.refreshes              {refresh}  sourceip.result (updated, unchanged, failed, rejected)
//	sourceip.ranges.prefixes               {prefix}   a gauge: the set served now
//	sourceip.ranges.age                    s          a gauge: since the set was last confirmed
//	sourceip.ranges.last_success           s          a gauge: Unix time of the last success, absent before it
//	sourceip.ranges.pending                {prefix}   a gauge: a set held back by the shrink or growth guard
//	sourceip.ranges.consecutive_failures   {refresh}  a gauge: failures since the last success
//	sourceip.ranges.drift.growth           1          a gauge: new space beyond the baseline, a fraction of it
//	sourceip.ranges.drift.shrink           1          a gauge: baseline space the set dropped, a fraction of it
//
// A refresher keeps serving its last good set however old it is; alert on
// age and consecutive_failures, and on refused swaps, rather than on the
// set alone. drift.growth approaches the refresher's MaxTotalGrowth as a
// feed grows refresh by refresh; alert before it reaches it, when the
// growth guard would hold the next set (ranges.ErrDrift).
//
// A connection that is shed (closed on arrival because the untrusted peers'
// pending budget, or one source's share of it, is spent) never reaches
// OnReject, so it is counted only here: a flood that fills the budget shows
// as a rising shed count while sourceip.proxyproto.pending for untrusted
// peers stays at its bound. Likewise a refusal that comes while
// proxyproto.Config.MaxOnReject OnReject calls are still running is not
// reported to OnReject, so it is missing from sourceip.proxyproto.rejections
// and counted in sourceip.proxyproto.unreported instead: with
// ObserveProxyRejection as OnReject, the listener's refusals are the sum of
// the two.
//
// A masqueraded result is counted in sourceip.resolutions with outcome
// "masqueraded" and in sourceip.masquerade.detections.
//
// # Correcting otelhttp's client.address
//
// otelhttp (go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp,
// v0.72.0) sets client.address on its server span to the leftmost entry of
// X-Forwarded-For when the header is present, and to the socket peer
// otherwise. The leftmost entry is whatever the client wrote, so any client
// can choose the address its spans show. The span is writable while the
// request is served, and the last value set for a key wins: mount the
// resolve middleware inside otelhttp's handler with this package as its
// Observer, and client.address is replaced by the resolved client.
//
//	handler := otelhttp.NewHandler(resolve(mux), "server") // resolve from middleware.New with Observer: inst
//
// Every entry point that resolves a request does this when given the
// Instrumentation as its Observer: middleware.New and RequireClient
// (ObserveResolve), a middleware.Policy's Handler and Serve, which resolve
// on their own when no resolve middleware ran before them
// (ObserveDecision, with the client the policy judged), ratelimit.HTTP's
// Handler (HTTPConfig.Observer) and grpcsourceip's interceptors. A clientip.Forwarder has no Observer: call ObserveResolve
// with what Forwarder.Header returns, from the reverse proxy's Rewrite,
// instead of Forwarder.Rewrite:
//
//	Rewrite: func(pr *httputil.ProxyRequest) {
//		pr.SetURL(upstream)
//		res, err := fw.Header(pr.Out.Header, pr.In)
//		inst.ObserveResolve(pr.In.Context(), res, err)
//	},
//
// client.address names the resolved client or nothing. When resolution
// fails, or the result is masqueraded (its address is a node, not a client),
// the Instrumentation sets client.address to the empty string, overwriting
// otelhttp's value, which may be the leftmost X-Forwarded-For entry the
// client wrote. It does not fall back to the socket peer: on these paths the
// peer is a trusted proxy or a masquerading node, not the client, and it is
// already in network.peer.address. The OpenTelemetry API cannot remove an
// attribute from a span; overwriting it is how it is cleared.
// sourceip.outcome on the same span says why there is no client, and
// sourceip.masqueraded=true marks a masqueraded result.
//
// Without the Observer, set the attribute in a handler, clearing it when
// there is no client:
//
//	res, ok := clientip.FromContext(r.Context())
//	addr := ""
//	if ok && !res.Masqueraded {
//		addr = res.Client.String()
//	}
//	trace.SpanFromContext(r.Context()).SetAttributes(semconv.ClientAddress(addr))
//
// A request whose resolution failed is refused before it reaches the
// handler, so only the Observer clears client.address on that path.
package otelsourceip
