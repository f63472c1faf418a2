package middleware

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
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

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/proxyproto"
)

func loopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// ppListener returns a PROXY listener on loopback that trusts loopback
// upstreams and requires a header from them.
func ppListener(t *testing.T) *proxyproto.Listener {
	t.Helper()
	pl, err := proxyproto.NewListener(loopback(t), proxyproto.Config{
		TrustedUpstreams:  clientip.Loopback(),
		ReadHeaderTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
}

func accept(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
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
			if ln.Addr() != inner.Addr() {
				t.Errorf("Addr = %v, want %v", ln.Addr(), inner.Addr())
			}
			dial(t, "tcp", ln.Addr().String(), tc.header)
			c := accept(t, ln)
			res, err := ResultFromConn(c)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if res.Client != addr(tc.want) || (tc.want != "" && res.Source != tc.src) {
				t.Errorf("result = %v, want %s from %v", res, tc.want, tc.src)
			}
			if res.Peer.Addr() != addr("127.0.0.1") || res.Peer.Port() == 0 {
				t.Errorf("peer = %v, want the socket peer", res.Peer)
			}
			if tc.proxy != "" && res.Proxy.String() != tc.proxy {
				t.Errorf("proxy = %v, want %s", res.Proxy, tc.proxy)
			}
			// The wrapper is transparent for the connection's own view.
			if tc.pp {
				if _, ok := proxyproto.FactsFromConn(c); !ok {
					t.Error("FactsFromConn does not see through the wrapper")
				}
			}
			b := make([]byte, 1)
			if _, err := io.ReadFull(c, b); err != nil || b[0] != 'x' {
				t.Errorf("read %q, %v", b, err)
			}
		})
	}
}

func TestListenerNilResolver(t *testing.T) {
	ln := NewListener(loopback(t), nil)
	dial(t, "tcp", ln.Addr().String(), nil)
	res, err := ResultFromConn(accept(t, ln))
	if !errors.Is(err, ErrInvalidConfig) || res.Client.IsValid() || res.Peer.Addr() != addr("127.0.0.1") {
		t.Errorf("ResultFromConn = %v, %v; want no client and ErrInvalidConfig", res, err)
	}
	p, _ := NewSourceRanges(SourceRangesConfig{Allow: clientip.Loopback()})
	if err := p.Check(res, err); !errors.Is(err, ErrUnresolved) {
		t.Errorf("Check = %v, want ErrUnresolved", err)
	}
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
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
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
	if err != nil {
		t.Fatal(err)
	}
	_, err = ResultFromConn(c)
	var ce *clientip.ChainError
	if !errors.As(err, &ce) || !errors.Is(err, clientip.ErrNoAddress) || ce.Value != "pipe" {
		t.Errorf("err = %#v, want ErrNoAddress naming the address", err)
	}
	// net.Pipe has no CloseWrite; the wrapper says so instead of pretending.
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err == nil {
		t.Error("CloseWrite on a pipe succeeded")
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after close = %v, want the inner listener's error", err)
	}
}

func TestResultFromConnForeign(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	for _, c := range []net.Conn{a, tls.Server(a, &tls.Config{})} {
		if res, err := ResultFromConn(c); !errors.Is(err, ErrNoResult) || res != (clientip.Result{}) {
			t.Errorf("ResultFromConn(%T) = %v, %v; want ErrNoResult", c, res, err)
		}
	}
	p, _ := NewSourceRanges(SourceRangesConfig{Allow: clientip.MustParsePrefixSet("0.0.0.0/0, ::/0")})
	if err := p.Check(ResultFromConn(a)); !errors.Is(err, ErrUnresolved) {
		t.Errorf("Check(ResultFromConn(foreign)) = %v, want ErrUnresolved", err)
	}
}

func TestListenerHalfClose(t *testing.T) {
	ln := NewListener(loopback(t), clientip.MustNew(clientip.Config{}))
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c := accept(t, ln)
	if _, ok := c.(io.ReaderFrom); !ok {
		t.Error("wrapper hides io.ReaderFrom")
	}
	go func() {
		io.Copy(c, strings.NewReader("hello")) // the TCP ReadFrom path
		c.(interface{ CloseWrite() error }).CloseWrite()
	}()
	got, err := io.ReadAll(client) // ends at the half-close
	if err != nil || string(got) != "hello" {
		t.Errorf("client read %q, %v", got, err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.TLS == nil {
		t.Fatal("not served over TLS")
	}
	s := <-conns
	if !s.tls {
		t.Error("the server did not get a *tls.Conn")
	}
	if s.err != nil || s.res.Client != addr("198.51.100.23") || s.res.Source != clientip.SourceProxyProtocol ||
		s.res.Peer.Addr() != addr("127.0.0.1") {
		t.Errorf("ResultFromConn(*tls.Conn) = %v, %v; want 198.51.100.23 from the PROXY header", s.res, s.err)
	}
}

func TestListenerAcceptAllocs(t *testing.T) {
	r := clientip.MustNew(clientip.Config{})
	c, err := net.Dial("tcp", loopback(t).Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One connection, handed out again and again.
	one := oneConnListener{c}
	ln := NewListener(one, r)
	if n := testing.AllocsPerRun(100, func() {
		got, _ := ln.Accept()
		ResultFromConn(got)
	}); n > 1 {
		t.Errorf("Accept + ResultFromConn allocates %v times, want 1 (the wrapper)", n)
	}
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
	mw, err := New(Config{Resolver: clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback(), Header: "X-Forwarded-For"})})
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	select {
	case ra := <-remote:
		t.Fatalf("the handler ran (RemoteAddr %q) and answered %d %q; want a 400 for an untrusted Unix peer", ra, resp.StatusCode, body)
	default:
	}
	if want := "cannot determine the client address: the connection has no IP address\n"; resp.StatusCode != http.StatusBadRequest || string(body) != want {
		t.Errorf("got %d %q; want 400 %q", resp.StatusCode, body, want)
	}
}
