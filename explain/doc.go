// Package explain answers "why is my client IP wrong?" for a live
// deployment: a [Handler] that explains the request it receives (or a
// connection its caller names) layer by layer and hop by hop, and an
// [Advisor] that watches resolved traffic for a while and proposes a
// [clientip.Config] with the findings behind it.
//
// # Explain
//
// An explanation ([Report]) shows everything the resolution rests on: the
// configuration in force (from the [clientip.Trust] the application
// resolves with), the socket peer, the PROXY protocol header with its TLVs
// (from proxyproto.FactsFromContext for HTTP, proxyproto.FactsFromConn for
// a connection), each forwarding header the request carries and whether it
// is read, the walk from [clientip.Resolver.Explain] with each hop's
// address, the hop that delivered it and whether that hop is trusted, the
// answer or the typed error with a hint, the masquerade flag, and, when a
// Service policy is configured, what [trafficpolicy.Expect] says of it
// compared with what the request shows.
//
//	h, err := explain.New(explain.Config{
//		Trust:      resolver,                              // the application's own
//		AllowPeers: clientip.MustParsePrefixSet("127.0.0.1"), // operators on the admin host
//	})
//	admin.Handle("/debug/clientip", h)
//
//	curl -H 'Accept: text/plain' http://127.0.0.1:9090/debug/clientip
//
// For a connection accepted through middleware.NewListener (MQTT, raw
// TCP), [Handler.ReportConn] and [Handler.ServeConn] explain the
// connection; the telemetry gateway serves them on its admin port.
//
// # Threat model
//
// An explanation is a map for an attacker: which proxies are trusted, which
// header is read, what the load balancer sends. The handler is off by
// default: a Config with nothing but Trust refuses every request with 404
// Not Found, as if nothing were mounted. Allow admits requests whose
// resolved client (no error, not masqueraded) is in the set, so a forged
// header admits no one unless the trust configuration already lets clients
// choose their address; AllowPeers admits requests whose socket peer is in
// the set and is not a trusted proxy, for operators who connect directly
// and need to see why resolution fails. Both are judged under the
// Resolver in force. Mount the handler on an admin listener where you can.
// Everything a client wrote is bounded (header lines, entries and TLV
// values are cut at 256 bytes, at most 8 lines and 66 entries) and
// quoted in the text rendering.
//
// # Advise
//
// An [Advisor] watches sampled requests and connections (SampleEvery),
// keeps bounded statistics per socket peer (MaxPeers; see [Advisor] for
// exactly what is kept), and proposes a configuration in [Advice]: the
// peers that look like proxies (they send forwarding headers and many
// distinct clients sit behind them; a public address outside the
// platforms' published ranges only when it sends PROXY headers, since a
// client that writes a different header on every request looks the same),
// the header they write, a platform's
// published ranges when the proxies are its edge or sit behind it (matched
// against the dated snapshots of clientip/ranges: Cloudflare, CloudFront,
// Fastly, Azure Front Door, Google Cloud load balancers), node addresses
// that deliver traffic without headers (masquerading under
// externalTrafficPolicy: Cluster), and findings, the dangerous ones flagged:
// a trusted peer that sends requests without forwarding headers, a
// configured header the proxies never write, answers taken from the
// leftmost entry of a header longer than the proxies write, a trusted set
// so wide that it contains clients. It never applies anything. The
// Handler serves it at ?view=advice; cmd/sourceip -fetch prints it.
//
// # The JSON documents
//
// The Handler writes [Report] (schema "sourceip.explain/v1") and [Advice]
// (schema "sourceip.advice/v1") as indented JSON. Field names are stable
// within a schema version: fields may be added, none is renamed, retyped or
// removed. Addresses are strings ("203.0.113.7", "10.0.0.1:40000"), enums
// their names ("x-forwarded-for", "trusted", "malformed"), omitted when
// empty. A Report's fields:
//
//	schema, kind ("request" | "connection")
//	request {method, host, path, proto} | connection {id, remote, local}
//	summary                         the answer in one line
//	config {trusted_proxies[], trusted_proxies_count, trusted_hops,
//	        trust_unix_socket, header, masquerade[], masquerade_count,
//	        max_hops, max_header_bytes}
//	socket {peer, local, unreadable, judged_untrusted}
//	proxy_protocol {version, command, source, destination,
//	        tlvs[{type, value, hex, len}],
//	        ssl {tls, cert_presented, cert_verified, version, cn, cipher, cert}}
//	steps[{hop, layer, header, entry, address, port, verdict, reason,
//	        delivered_by {hop, address, trusted}, note}]
//	omitted_entries
//	headers[{name, read, values[], lines, note}]
//	result {client, source, header, hop, via, peer, proxy, masqueraded}
//	error {reason, message, hint}   absent when resolved
//	masqueraded
//	recorded {summary, result, error}   a connection's answer at accept, when it differs
//	policy {expectation, peer, client_layer, proxy_header, recipe,
//	        checks[{name, status, text}]}
//	notes[]
//
// An Advice's fields: schema, since, until, seen, sampled, sample_every,
// unix_peers, evicted_peers, outcomes[{reason, count}], peers[{address,
// role, provider, trusted, requests, proxy_protocol, no_forwarding,
// headers[{name, requests}], depths[], clients, upstreams[],
// upstream_classes[{class, count}], leftmost, outcomes[]}], current and
// proposal (as config above), preset, go, findings[{kind, severity, peer,
// text}].
package explain
