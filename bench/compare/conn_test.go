package compare

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// peerConn is a server-side connection that reports peer as its remote
// address, so that one real server can stand for a connection from any
// scenario's peer.
type peerConn struct {
	net.Conn
	peer net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.peer }

// serverContext returns the context a real net/http Server gives a request
// on a connection from peer when its ConnContext is
// middleware.ConnContext(trust): it serves one request and keeps that
// request's context, so the chain of context nodes a lookup walks is the
// one net/http builds (the server, the connection's node, the local
// address, a cancel node for the connection and one for the request).
// Passing trust nil gives the context without sourceip's node.
func serverContext(tb testing.TB, trust clientip.Trust, peer string) context.Context {
	tb.Helper()
	addr := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(peer))
	ctxs := make(chan context.Context, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { ctxs <- r.Context() }))
	if trust != nil {
		cc := middleware.ConnContext(trust)
		srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { return cc(ctx, peerConn{c, addr}) }
	}
	srv.Start()
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return <-ctxs
}

// connRequest is s's request as a server with middleware.ConnContext(trust)
// hands it to handlers.
func (s scenario) connRequest(tb testing.TB, trust clientip.Trust) *http.Request {
	return s.request().WithContext(serverContext(tb, trust, s.remote))
}

// BenchmarkConnContext is what the clientip-conn and policy rows pay once
// per connection and do not show: middleware.ConnContext reading the peer
// and, when the connection alone names the client (direct), resolving it.
// A connection that carries one request pays it on top of that request's
// FromRequest.
func BenchmarkConnContext(b *testing.B) {
	base := serverContext(b, nil, "192.0.2.1:1")
	for _, s := range scenarios() {
		cc := middleware.ConnContext(resolverFor(s))
		var conn net.Conn = peerConn{peer: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s.remote))}
		res, err := clientip.FromRequest(s.request().WithContext(cc(base, conn)))
		if err != nil || res.Client.String() != s.want {
			b.Fatalf("%s: got %v, %v; want %s", s.name, res, err, s.want)
		}
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				cc(base, conn)
			}
		})
	}
}
