package middleware

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/proxyproto"
)

func loopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln
}

// ppListener returns a PROXY listener on loopback that trusts loopback
// upstreams and requires a header from them.
func ppListener(t *testing.T) *proxyproto.Listener {
	t.Helper()
	pl, err := proxyproto.NewListener(loopback(t), proxyproto.Config{
		Trust:             clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback()}),
		ReadHeaderTimeout: 5 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { pl.Close() })
	return pl
}

func proxyHeader(src string) proxyproto.Header {
	return proxyproto.Header{
		Version:     2,
		Command:     proxyproto.CommandProxy,
		Source:      netip.MustParseAddrPort(src),
		Destination: netip.MustParseAddrPort("192.0.2.10:8883"),
	}
}

// dial connects to ln's address from the test, with a PROXY header when h is
// not nil, writes a byte so the listener has something to judge, and keeps
// the connection open until the test ends.
func dial(t *testing.T, network, address string, h *proxyproto.Header) {
	t.Helper()
	var c net.Conn
	var err error
	if h != nil {
		c, err = proxyproto.DialContext(t.Context(), nil, network, address, *h)
	} else {
		c, err = net.Dial(network, address)
	}
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Write([]byte{'x'})
	require.NoError(t, err)
}

func accept(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	c, err := ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestListener(t *testing.T) {
	direct := clientip.MustNew(clientip.Config{})
	trustLoopback := clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback()})
	masqLoopback := clientip.MustNew(clientip.Config{Masquerade: clientip.Loopback()})
	hdr := proxyHeader("203.0.113.7:5555")
	tests := []struct {
		name    string
		pp      bool // serve through a PROXY listener
		header  *proxyproto.Header
		r       *clientip.Resolver
		want    string // client
		src     clientip.Source
		proxy   string // Result.Proxy
		wantErr error
	}{
		{name: "plain socket", r: direct, want: "127.0.0.1", src: clientip.SourceSocket},
		{name: "PROXY source through a trusted load balancer", pp: true, header: &hdr, r: trustLoopback,
			want: "203.0.113.7", src: clientip.SourceProxyProtocol, proxy: "203.0.113.7:5555"},
		{name: "PROXY source ignored when the resolver does not trust the balancer", pp: true, header: &hdr, r: direct,
			want: "127.0.0.1", src: clientip.SourceSocket, proxy: "203.0.113.7:5555"},
		{name: "trusted peer without PROXY is all trusted", r: trustLoopback, wantErr: clientip.ErrAllTrusted},
		{name: "masquerading node", r: masqLoopback, want: "127.0.0.1", src: clientip.SourceSocket, wantErr: clientip.ErrMasqueraded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var inner net.Listener
			if tc.pp {
				inner = ppListener(t)
			} else {
				inner = loopback(t)
			}
			ln := NewListener(inner, tc.r)
			assert.Equal(t, inner.Addr(), ln.Addr())
			dial(t, "tcp", ln.Addr().String(), tc.header)
			c := accept(t, ln)
			res, err := ResultFromConn(c)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
			}
			assert.Equal(t, addr(tc.want), res.Client, "client")
			if tc.want != "" {
				assert.Equal(t, tc.src, res.Source, "source")
			}
			assert.Equal(t, addr("127.0.0.1"), res.Peer.Addr(), "the socket peer")
			assert.NotZero(t, res.Peer.Port(), "the socket peer's port")
			if tc.proxy != "" {
				assert.Equal(t, tc.proxy, res.Proxy.String())
			}
			// The wrapper is transparent for the connection's own view.
			if tc.pp {
				_, ok := proxyproto.FactsFromConn(c)
				assert.True(t, ok, "FactsFromConn does not see through the wrapper")
			}
			b := make([]byte, 1)
			_, err = io.ReadFull(c, b)
			require.NoError(t, err)
			assert.Equal(t, byte('x'), b[0])
		})
	}
}

func TestListenerNilResolver(t *testing.T) {
	ln := NewListener(loopback(t), nil)
	dial(t, "tcp", ln.Addr().String(), nil)
	res, err := ResultFromConn(accept(t, ln))
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.False(t, res.Client.IsValid(), "a client without a resolver: %v", res)
	assert.Equal(t, addr("127.0.0.1"), res.Peer.Addr())
	p, perr := NewSourceRanges(SourceRangesConfig{Allow: clientip.Loopback()})
	require.NoError(t, perr)
	assert.ErrorIs(t, p.Check("", res, err), ErrUnresolved)
}

func TestListenerUnix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	inner, err := net.Listen("unix", path)
	if err != nil {
		e2e.Unavailable(t, "no Unix sockets: "+err.Error())
	}
	defer inner.Close()
	for _, tc := range []struct {
		name    string
		cfg     clientip.Config
		wantErr error
	}{
		{name: "untrusted Unix peer has no address", cfg: clientip.Config{}, wantErr: clientip.ErrNoAddress},
		{name: "trusted Unix peer is all trusted", cfg: clientip.Config{TrustUnixSocket: true}, wantErr: clientip.ErrAllTrusted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := NewListener(inner, clientip.MustNew(tc.cfg))
			dial(t, "unix", path, nil)
			_, err := ResultFromConn(accept(t, ln))
			assert.ErrorIs(t, err, tc.wantErr)
		})
	}
}

// pipeListener hands out one end of a net.Pipe, whose address is "pipe".
type pipeListener struct{ conns chan net.Conn }

func (l pipeListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (l pipeListener) Close() error   { return nil }
func (l pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

func TestListenerNonIPAddress(t *testing.T) {
	pl := pipeListener{make(chan net.Conn, 1)}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	pl.conns <- a
	close(pl.conns)
	// Even a resolver that trusts Unix sockets does not take "pipe" for one.
	ln := NewListener(pl, clientip.MustNew(clientip.Config{TrustUnixSocket: true}))
	c, err := ln.Accept()
	require.NoError(t, err)
	_, err = ResultFromConn(c)
	var ce *clientip.ChainError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, clientip.ErrNoAddress)
	assert.Equal(t, "pipe", ce.Value, "the error names the address")
	// net.Pipe has no CloseWrite; the wrapper says so instead of pretending.
	assert.Error(t, c.(interface{ CloseWrite() error }).CloseWrite(), "CloseWrite on a pipe succeeded")
	_, err = ln.Accept()
	assert.ErrorIs(t, err, net.ErrClosed, "Accept after close returns the inner listener's error")
}

func TestResultFromConnForeign(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	for _, c := range []net.Conn{a, tls.Server(a, &tls.Config{})} {
		res, err := ResultFromConn(c)
		assert.ErrorIs(t, err, ErrNoResult, "ResultFromConn(%T)", c)
		assert.Zero(t, res, "ResultFromConn(%T)", c)
	}
	p, err := NewSourceRanges(SourceRangesConfig{Allow: clientip.MustParsePrefixSet("0.0.0.0/0, ::/0")})
	require.NoError(t, err)
	res, err := ResultFromConn(a)
	assert.ErrorIs(t, p.Check("", res, err), ErrUnresolved, "Check(ResultFromConn(foreign))")
}

func TestListenerHalfClose(t *testing.T) {
	ln := NewListener(loopback(t), clientip.MustNew(clientip.Config{}))
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	c := accept(t, ln)
	assert.Implements(t, (*io.ReaderFrom)(nil), c, "the wrapper hides io.ReaderFrom")
	go func() {
		io.Copy(c, strings.NewReader("hello")) // the TCP ReadFrom path
		c.(interface{ CloseWrite() error }).CloseWrite()
	}()
	got, err := io.ReadAll(client) // ends at the half-close
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
}

// TestListenerTLSOverPROXY is the reference layering for MQTT over TLS behind
// a PROXY-protocol load balancer: TCP, PROXY, resolution, then TLS outside.
func TestListenerTLSOverPROXY(t *testing.T) {
	r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback()})
	ln := NewListener(ppListener(t), r)
	type seen struct {
		res clientip.Result
		err error
		tls bool
	}
	conns := make(chan seen, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		_, isTLS := c.(*tls.Conn)
		res, err := ResultFromConn(c)
		conns <- seen{res, err, isTLS}
		return ctx
	}
	srv.StartTLS() // wraps ln in tls.NewListener
	defer srv.Close()

	tr := srv.Client().Transport.(*http.Transport).Clone()
	h := proxyHeader("198.51.100.23:40000")
	tr.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		return proxyproto.DialContext(ctx, nil, network, address, h)
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.NotNil(t, resp.TLS, "not served over TLS")
	s := <-conns
	assert.True(t, s.tls, "the server did not get a *tls.Conn")
	require.NoError(t, s.err, "ResultFromConn(*tls.Conn)")
	assert.Equal(t, addr("198.51.100.23"), s.res.Client, "the client from the PROXY header")
	assert.Equal(t, clientip.SourceProxyProtocol, s.res.Source)
	assert.Equal(t, addr("127.0.0.1"), s.res.Peer.Addr())
}

func TestListenerAcceptAllocs(t *testing.T) {
	r := clientip.MustNew(clientip.Config{})
	c, err := net.Dial("tcp", loopback(t).Addr().String())
	require.NoError(t, err)
	defer c.Close()
	// One connection, handed out again and again.
	one := oneConnListener{c}
	ln := NewListener(one, r)
	n := testing.AllocsPerRun(100, func() {
		got, _ := ln.Accept()
		ResultFromConn(got)
	})
	assert.LessOrEqual(t, n, 1.0, "Accept + ResultFromConn allocates more than the wrapper")
}

type oneConnListener struct{ c net.Conn }

func (l oneConnListener) Accept() (net.Conn, error) { return l.c, nil }
func (l oneConnListener) Close() error              { return nil }
func (l oneConnListener) Addr() net.Addr            { return l.c.LocalAddr() }

// Spoofing trick: an HTTP client on a Unix-domain listener binds its socket to
// the path "127.0.0.1:9", which net/http reports as r.RemoteAddr. The
// middleware must see a Unix peer, untrusted here, not a trusted loopback
// proxy whose X-Forwarded-For it believes (found by the project's review,
// 2026-12-02).
func TestResolveUnixPeerNamedLikeAnIP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "http.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		e2e.Unavailable(t, "no Unix sockets: "+err.Error())
	}
	mw, err := New(Config{Trust: clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback(), Header: "X-Forwarded-For"})})
	require.NoError(t, err)
	remote := make(chan string, 1)
	srv := &http.Server{Handler: mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		remote <- r.RemoteAddr
		res, _ := clientip.FromContext(r.Context())
		io.WriteString(w, res.Client.String())
	}))}
	go srv.Serve(ln)
	defer srv.Close()

	t.Chdir(t.TempDir())
	c, err := net.DialUnix("unix", &net.UnixAddr{Name: "127.0.0.1:9", Net: "unix"}, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		e2e.Unavailable(t, "cannot bind a Unix client socket: "+err.Error())
	}
	defer c.Close()
	if c.LocalAddr().String() != "127.0.0.1:9" {
		e2e.Unavailable(t, fmt.Sprintf("client socket bound as %q", c.LocalAddr()))
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.66\r\nConnection: close\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	select {
	case ra := <-remote:
		require.FailNowf(t, "the handler ran", "RemoteAddr %q, answer %d %q; want a 400 for an untrusted Unix peer", ra, resp.StatusCode, body)
	default:
	}
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, "cannot determine the client address: socket peer has no IP address\n", string(body))
}

// TestWithResult: a connection resolved elsewhere (at a WebSocket upgrade)
// carries that resolution through wrappers, as NewListener's do, and the
// PROXY layer under it stays reachable.
func TestWithResult(t *testing.T) {
	pl := ppListener(t)
	go func() {
		c, err := proxyproto.DialContext(context.Background(), nil, "tcp", pl.Addr().String(), proxyproto.Header{
			Version: 2, Command: proxyproto.CommandProxy, Source: netip.MustParseAddrPort("198.51.100.7:5555")})
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	c, err := pl.Accept()
	require.NoError(t, err)
	defer c.Close()
	want := clientip.Result{Client: netip.MustParseAddr("203.0.113.9"), Source: clientip.SourceXForwardedFor, Hop: 2}
	for _, tt := range []struct {
		name string
		err  error
	}{{"resolved", nil}, {"failed", clientip.ErrAllTrusted}} {
		t.Run(tt.name, func(t *testing.T) {
			wc := WithResult(c, want, tt.err)
			for _, outer := range []net.Conn{wc, tls.Server(wc, &tls.Config{})} {
				res, err := ResultFromConn(outer)
				assert.Equal(t, want, res, "through %T", outer)
				assert.Equal(t, tt.err, err, "through %T", outer)
				f, ok := proxyproto.FactsFromConn(outer)
				assert.True(t, ok, "the PROXY layer through %T", outer)
				assert.Equal(t, netip.MustParseAddrPort("198.51.100.7:5555"), f.Source)
			}
		})
	}
	var out net.Conn
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { out = WithResult(c, want, nil) }), "allocations")
	assert.NotNil(t, out)
}
