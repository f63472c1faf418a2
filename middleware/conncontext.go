package middleware

import (
	"context"
	"net"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// ConnContext returns a function for [net/http.Server].ConnContext that
// attaches trust and the connection's layers to the context of every request
// the connection carries, once per connection, so that requests are resolved
// without copying them and without parsing r.RemoteAddr:
//
//	srv := &http.Server{Handler: h, ConnContext: middleware.ConnContext(trust)}
//
// Handlers then read the client with [clientip.FromRequest], policies
// ([Policy.Handler], [RequireClient]) resolve on demand, and
// trust.Resolver().ResolveRequest (ratelimit.HTTP, [New]) finds the layers
// with one lookup.
//
// The layers are read as [NewListener] reads them: from a
// proxyproto.Listener's connection (directly or under TLS) the load balancer
// is the socket peer and the PROXY source the candidate client, and the
// connection's [proxyproto.Facts] are stored too, as proxyproto.ConnContext
// stores them (read them with proxyproto.FactsFromContext), so this is the
// only ConnContext a server needs. From any other connection the peer is
// read from its *net.TCPAddr, without string parsing; a Unix-domain peer has
// no IP address (trusted only with clientip.Config.TrustUnixSocket); an
// address of another type is read from its text when its network is an IP
// one ("tcp", "tcp6", "udp", …) and names an IP address and port without a
// zone. Any other peer (a *net.TCPAddr without an IP address, a pipe, a
// network of the caller's own) is never trusted, and its requests fail with
// [clientip.ErrNoAddress].
//
// When trust's resolver names the client from the connection alone (a
// direct client, or the PROXY source), that answer is computed here and
// reused by each request on the connection while the resolver stays in
// force. A nil trust attaches the layers without a trust: clientip.FromRequest
// then refuses every request with [clientip.ErrNoTrust].
//
// To combine it with a ConnContext of your own, call one from the other. The
// returned function allocates four times per connection with PROXY facts
// (three for proxyproto.NewContext) and once without, and is safe for
// concurrent use.
func ConnContext(trust clientip.Trust) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		if f, ok := proxyproto.FactsFromConn(c); ok {
			ctx = proxyproto.NewContext(ctx, f)
		}
		t, err := transportOf(c)
		if err != nil {
			// Not an IP peer and not a Unix socket: nothing to believe.
			t = clientip.Transport{PeerUntrusted: true}
		}
		return clientip.NewConnContext(ctx, trust, t)
	}
}
