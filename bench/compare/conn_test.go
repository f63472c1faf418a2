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
