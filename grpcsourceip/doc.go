// Package grpcsourceip resolves the client of each gRPC call with
// [github.com/sourceip/sourceip/clientip] — from the transport peer, the
// PROXY protocol layer and the forwarding metadata, under one trust
// configuration — and judges, limits and observes it before the service
// runs. It is a module of its own, so that gRPC stays out of the sourceip
// library's dependencies.
//
// # Wiring
//
// An [Interceptor] resolves each call, refuses the ones that fail, and
// stores the [clientip.Result] in the call's context, where the service
// reads it with [clientip.FromContext]. [Credentials] wraps the server's
// transport credentials so that a connection from a [proxyproto.Listener]
// brings its PROXY facts along:
//
//	resolver, err := clientip.New(clientip.Config{
//		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"), // the load balancer, the ingress
//		Header:         "X-Forwarded-For",                         // read from the x-forwarded-for metadata
//	})
//	in, err := grpcsourceip.New(grpcsourceip.Config{
//		Trust:     resolver,
//		Policy:    policy,                                       // optional; see Policy
//		RateLimit: grpcsourceip.RateLimit{Store: limiter},       // optional; a *ratelimit.Limiter or a shared store
//		Observer:  inst,                                         // optional; an otelsourceip.Instrumentation
//	})
//	pl, err := proxyproto.NewListener(tcpListener, proxyproto.Config{Trust: resolver}) // the same trust
//	srv := grpc.NewServer(
//		grpc.Creds(grpcsourceip.Credentials(credentials.NewTLS(tlsConfig))), // or insecure.NewCredentials()
//		grpc.ChainUnaryInterceptor(in.Unary),
//		grpc.ChainStreamInterceptor(in.Stream),
//	)
//	srv.Serve(pl)
//
// In a service method:
//
//	res, ok := clientip.FromContext(ctx) // ok is false only when a Policy admitted a call it could not resolve
//
// # Where the chain comes from
//
// The socket layer is the connection's peer. Through [Credentials], a
// connection from a proxyproto.Listener keeps the load balancer as the
// socket peer and adds the PROXY source as the next hop; without it gRPC
// reports the PROXY source as the peer (see the threat model). A
// grpc.Server served as an http.Handler (ServeHTTP) gets the same layers
// from proxyproto.ConnContext, as the HTTP middleware does.
//
// The header layer is gRPC metadata. HTTP/2 field names are lower case, so
// the resolver's configured header (clientip.Config.Header) is read from
// the metadata key of the same name in lower case: X-Forwarded-For from
// x-forwarded-for, Forwarded (RFC 7239) from forwarded, a single-address
// header such as X-Real-IP from x-real-ip. No other key is ever read.
// gRPC keeps a field that arrives several times as several values of one
// key; they are read in the order they arrived, each as one line of the
// header, which is how clientip reads repeated HTTP header lines: merged
// into one list for X-Forwarded-For and Forwarded, and
// clientip.ErrMultipleValues for a single-address header.
//
// # Status codes
//
// A refused call never reaches the service. Its status message names the
// kind of refusal — a [clientip.Reason] or a policy's verdict — and never
// anything the client wrote:
//
//   - InvalidArgument: the chain cannot be read ("cannot determine the
//     client address: malformed", "…: all_trusted", "…: multiple_values",
//     …), with or without a Policy;
//   - PermissionDenied: the Policy refused the client ("client address
//     refused: not_allowed", "…: masqueraded", "…: error" for a policy's own
//     error), or the rate limit refused a masqueraded client;
//   - ResourceExhausted: the rate limit refused the call ("rate limit
//     exceeded"), with a google.rpc.RetryInfo detail and the
//     grpc-retry-pushback-ms trailer ([PushbackKey]) saying when the
//     client's bucket holds a token again;
//   - Unavailable: a shared rate-limit Store could not decide.
//
// # Policy, rate limits, observation
//
// A [Policy] judges each call's resolution with the call's full method
// name as its target; a *middleware.Policy of middleware.TargetNames is
// one, with rules per method (see the examples). The rate limit is ratelimit's: a token
// per call (per stream for streaming calls) from the bucket of the
// resolved client's [ratelimit.Key], in a *ratelimit.Limiter or a store
// shared across replicas. The Observer is middleware's: an
// otelsourceip.Instrumentation puts client.address, network.peer.* and
// the sourceip.* attributes on the span in the call's context (otelgrpc's
// server span when its stats handler is installed) and counts resolutions
// and policy denials, exactly as for HTTP.
//
// # Threat model
//
// Anyone can send any metadata: x-forwarded-for, forwarded, x-real-ip,
// several values of each. The interceptor adds no trust decision of its
// own; clientip's walk makes it, once per call, and so:
//
//   - A client connecting directly — not from a trusted proxy — is its
//     socket peer, and its metadata is never read.
//   - Behind trusted proxies, a client can write anything at the left of
//     x-forwarded-for, and can send extra values of the key, but the walk
//     stops at the entry the outermost trusted proxy wrote; reading only
//     the first value of a key, or the leftmost entry, would name what the
//     client wrote.
//   - A second value of a single-address key is refused, never resolved
//     to the first or the last.
//   - A PROXY header is believed only from the proxyproto.Listener's
//     trusted upstreams. Without [Credentials] on such a listener, gRPC
//     reports the PROXY source as the peer and the load balancer drops out
//     of the chain: in hop-count mode (clientip.Config.TrustedHops) the
//     walk counts one hop fewer and names an entry the client wrote, and
//     in either mode a connection on which the load balancer names no
//     client — a LOCAL header, or no header from one of
//     proxyproto.Config.Upstreams — is walked past the load balancer into
//     forwarding metadata the client wrote, where Credentials ends the
//     walk at the load balancer. Use Credentials whenever the server
//     listens on a proxyproto.Listener.
//   - A Unix-domain peer has no IP address, whatever its address reads
//     like: its client chose the path it bound, which can read
//     "127.0.0.1:9" (and ServeHTTP reports it as a TCP address). A peer on
//     no IP network at all (an in-memory listener) fails with
//     clientip.ErrNoAddress.
//   - A failure is a refusal, never a fall-back to the peer or to the
//     leftmost entry; a masqueraded result (a node standing in for a lost
//     client) goes on flagged for a Policy to refuse.
//
// What the metadata of a call cannot tell: what a trusted proxy itself
// forwards unchecked. A proxy must append the address it received the call
// from (nginx: grpc_set_header X-Forwarded-For
// $proxy_add_x_forwarded_for), never pass the client's value on alone.
//
// # Connect
//
// Connect (connectrpc.com/connect) services — which also answer gRPC and
// gRPC-Web clients — are net/http handlers: resolve, judge and limit them
// with the HTTP middleware (github.com/sourceip/sourceip/middleware and
// ratelimit.HTTP), which reads the same headers under the same trust. This
// package's interceptors serve grpc-go's grpc.Server.
package grpcsourceip
