package middleware

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/proxyproto"
)

// tcpConn is a connection whose only use is its addresses.
type tcpConn struct {
	net.Conn
	peer netip.AddrPort
}

func (c tcpConn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.peer) }

// oddAddr is an address of a network that names no IP peer, whatever its
// text says.
type oddAddr struct{}

func (oddAddr) Network() string { return "memory" }
func (oddAddr) String() string  { return "10.0.0.1:80" }

type oddConn struct{ net.Conn }

func (oddConn) RemoteAddr() net.Addr { return oddAddr{} }

func TestConnContext(t *testing.T) {
	trust := testResolver(t)
	tests := []struct {
		name string
		conn net.Conn
		xff  string
		want string
		from clientip.Source
		err  error
	}{
		{name: "TCP peer read from its TCPAddr", conn: tcpConn{peer: netip.MustParseAddrPort("203.0.113.9:5000")}, xff: "6.6.6.6",
			want: "203.0.113.9", from: clientip.SourceSocket},
		{name: "IPv4-mapped TCP peer unmapped", conn: tcpConn{peer: netip.MustParseAddrPort("[::ffff:10.0.0.1]:5000")}, xff: "198.51.100.7",
			want: "198.51.100.7", from: clientip.SourceXForwardedFor},
		{name: "a peer of another kind is never trusted, whatever its text", conn: oddConn{}, xff: "198.51.100.7", err: clientip.ErrNoAddress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequestWithContext(ConnContext(trust)(context.Background(), tc.conn), "GET", "/", nil)
			req.RemoteAddr = "10.0.0.99:1" // never read
			req.Header.Set("X-Forwarded-For", tc.xff)
			res, err := clientip.FromRequest(req)
			require.ErrorIs(t, err, tc.err)
			if tc.err != nil {
				return
			}
			assert.Equal(t, addr(tc.want), res.Client)
			assert.Equal(t, tc.from, res.Source)
		})
	}
	// A nil trust stores the layers without one: requests are refused.
	req := httptest.NewRequestWithContext(ConnContext(nil)(context.Background(), tcpConn{peer: netip.MustParseAddrPort("203.0.113.9:1")}), "GET", "/", nil)
	_, err := clientip.FromRequest(req)
	assert.ErrorIs(t, err, clientip.ErrNoTrust)
}

// serve runs srv on l until the test ends.
func serve(t *testing.T, srv *http.Server, l net.Listener) {
	t.Helper()
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// A real http.Server with ConnContext over a PROXY listener: the handler
// behind RequireClient reads the PROXY source, the load balancer stays the
// socket peer, the PROXY Facts are in the context too, and a forged
// X-Forwarded-For from the PROXY client is not read.
func TestConnContextProxyListener(t *testing.T) {
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32, 10.0.0.0/8"), Header: "X-Forwarded-For"})
	pl, err := proxyproto.NewListener(loopback(t), proxyproto.Config{Trust: trust})
	require.NoError(t, err)
	mw, err := RequireClient(Config{})
	require.NoError(t, err)
	type seen struct {
		res   clientip.Result
		facts proxyproto.Facts
		ok    bool
	}
	got := make(chan seen, 4)
	srv := &http.Server{
		Handler: mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res, _ := clientip.FromRequest(r)
			f, ok := proxyproto.FactsFromContext(r.Context())
			got <- seen{res, f, ok}
		})),
		ConnContext:       ConnContext(trust),
		ReadHeaderTimeout: 5 * time.Second,
	}
	serve(t, srv, pl)
	for _, tc := range []struct {
		name, src, xff, want string
		from                 clientip.Source
	}{
		{"PROXY client's forged XFF ignored", "203.0.113.7:5555", "6.6.6.6", "203.0.113.7", clientip.SourceProxyProtocol},
		{"trusted PROXY source hands on to XFF", "10.0.0.5:5555", "6.6.6.6, 198.51.100.7", "198.51.100.7", clientip.SourceXForwardedFor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := &http.Client{Transport: &http.Transport{
				DisableKeepAlives: true,
				DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
					return proxyproto.DialContext(ctx, nil, network, address, proxyHeader(tc.src))
				},
			}}
			req, _ := http.NewRequest("GET", "http://"+pl.Addr().String()+"/", nil)
			req.Header.Set("X-Forwarded-For", tc.xff)
			resp, err := client.Do(req)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			s := <-got
			assert.Equal(t, addr(tc.want), s.res.Client)
			assert.Equal(t, tc.from, s.res.Source)
			assert.Equal(t, addr("127.0.0.1"), s.res.Peer.Addr(), "the balancer is the socket peer")
			require.True(t, s.ok, "no PROXY Facts in the context")
			assert.Equal(t, tc.src, s.facts.Source.String())
		})
	}
}

// On a Unix-domain listener the peer has no IP address: trusted only with
// TrustUnixSocket, and then the header names the client.
func TestConnContextUnix(t *testing.T) {
	for _, tc := range []struct {
		name      string
		trustUnix bool
		want      string
		err       error
	}{
		{"untrusted Unix peer", false, "", clientip.ErrNoAddress},
		{"trusted Unix peer hands on to XFF", true, "198.51.100.7", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Trusting loopback makes the header readable without trusting
			// the Unix peer.
			trust := clientip.MustNew(clientip.Config{TrustUnixSocket: tc.trustUnix, TrustedProxies: clientip.Loopback(), Header: "X-Forwarded-For"})
			type out struct {
				res clientip.Result
				err error
			}
			got := make(chan out, 1)
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				res, err := clientip.FromRequest(r)
				got <- out{res, err}
			}), ConnContext: ConnContext(trust)}
			ul, err := net.Listen("unix", filepath.Join(t.TempDir(), "u"))
			if err != nil {
				e2e.Unavailable(t, "no Unix-domain sockets: "+err.Error())
			}
			serve(t, srv, ul)
			client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", ul.Addr().String())
			}}}
			req, _ := http.NewRequest("GET", "http://unix/", nil)
			req.Header.Set("X-Forwarded-For", "198.51.100.7")
			resp, err := client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			o := <-got
			if tc.err != nil {
				assert.True(t, errors.Is(o.err, tc.err), "error %v", o.err)
				return
			}
			require.NoError(t, o.err)
			assert.Equal(t, addr(tc.want), o.res.Client)
		})
	}
}

// ConnContext allocates per connection what its documentation states: once
// for a TCP peer, four times with PROXY facts, whether the connection names
// the client or hands on to a header (a trusted proxy's, the common case
// behind a load balancer), so the answer that the header decides is not
// built as an error and thrown away.
func TestConnContextAllocs(t *testing.T) {
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.0/8, 10.0.0.0/8"), Header: "X-Forwarded-For"})
	direct := clientip.MustNew(clientip.Config{})
	ln := loopback(t)
	dial(t, "tcp", ln.Addr().String(), nil)
	tcp := accept(t, ln)
	pl, err := proxyproto.NewListener(loopback(t), proxyproto.Config{Trust: trust, ReadHeaderTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { pl.Close() })
	hClient, hProxy := proxyHeader("198.51.100.7:5555"), proxyHeader("10.0.0.5:5555")
	dial(t, "tcp", pl.Addr().String(), &hClient)
	withClient := accept(t, pl)
	dial(t, "tcp", pl.Addr().String(), &hProxy)
	withProxy := accept(t, pl)
	for _, tc := range []struct {
		name  string
		trust clientip.Trust
		conn  net.Conn
		want  float64
	}{
		{"direct TCP peer", direct, tcp, 1},
		{"trusted proxy's TCP connection", trust, tcp, 1},
		{"PROXY source is the client", trust, withClient, 4},
		{"PROXY source is a trusted proxy", trust, withProxy, 4},
	} {
		cc := ConnContext(tc.trust)
		assert.Equal(t, tc.want, testing.AllocsPerRun(100, func() { cc(context.Background(), tc.conn) }), tc.name)
	}
}

// noIPConn is a connection whose RemoteAddr is a *net.TCPAddr without an IP
// address, as a wrapper that does not know its peer may report it.
type noIPConn struct {
	net.Conn
	addr *net.TCPAddr
}

func (c noIPConn) RemoteAddr() net.Addr { return c.addr }

// Spoofing trick: a connection whose *net.TCPAddr has no IP address (the
// zero TCPAddr, or a nil one) names no peer, and is not a Unix-domain
// socket either. Read as a Unix peer, it would be trusted under
// TrustUnixSocket and its client's forged X-Forwarded-For believed; it must
// fail with ErrNoAddress, as ConnContext and NewListener document for an
// address that is not an IP address and port.
func TestTCPAddrWithoutIPIsNoUnixPeer(t *testing.T) {
	trust := clientip.MustNew(clientip.Config{TrustUnixSocket: true, Header: "X-Forwarded-For"})
	for name, a := range map[string]*net.TCPAddr{"zero TCPAddr": {}, "nil TCPAddr": nil, "port only": {Port: 80}} {
		t.Run(name, func(t *testing.T) {
			c := noIPConn{addr: a}
			req := httptest.NewRequestWithContext(ConnContext(trust)(context.Background(), c), "GET", "/", nil)
			req.Header.Set("X-Forwarded-For", "198.51.100.7")
			res, err := clientip.FromRequest(req)
			require.ErrorIs(t, err, clientip.ErrNoAddress, "ConnContext: resolved %v", res.Client)

			ln := NewListener(oneConnListener{c}, trust)
			got, err := ln.Accept()
			require.NoError(t, err)
			_, err = ResultFromConn(got)
			require.ErrorIs(t, err, clientip.ErrNoAddress, "NewListener")
		})
	}
}
