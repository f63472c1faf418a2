package proxyproto

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
)

// The listener tests run on loopback. 127.0.0.1 is the trusted load balancer;
// clients dial from other 127.x addresses so each layer is distinguishable.

const lbAddr = "127.0.0.1"

type server struct {
	l        *Listener
	accepted chan *Conn
	rejected chan Rejection
}

// newServer starts a Listener on loopback under cfg (OnReject is set) with a
// goroutine feeding accepted connections to a channel.
func newServer(t testing.TB, cfg Config) *server {
	t.Helper()
	inner, err := net.Listen("tcp", lbAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{accepted: make(chan *Conn, 128), rejected: make(chan Rejection, 2048)}
	cfg.OnReject = func(r Rejection) { s.rejected <- r }
	s.l, err = NewListener(inner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := s.l.Accept()
			if err != nil {
				return
			}
			s.accepted <- c.(*Conn)
		}
	}()
	t.Cleanup(func() {
		s.l.Close()
		<-done
		for {
			select {
			case c := <-s.accepted:
				c.Close()
			default:
				return
			}
		}
	})
	return s
}

func (s *server) addr() string { return s.l.Addr().String() }

// dial connects from the loopback address src.
func dial(t testing.TB, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (s *server) accept(t testing.TB) *Conn {
	t.Helper()
	select {
	case c := <-s.accepted:
		t.Cleanup(func() { c.Close() })
		return c
	case r := <-s.rejected:
		t.Fatalf("rejected instead of accepted: %+v", r)
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted within 5s")
	}
	return nil
}

func (s *server) reject(t testing.TB) Rejection {
	t.Helper()
	select {
	case r := <-s.rejected:
		return r
	case c := <-s.accepted:
		t.Fatalf("accepted instead of rejected: %v", c.Facts())
	case <-time.After(5 * time.Second):
		t.Fatal("no rejection within 5s")
	}
	return Rejection{}
}

// closedByServer reports whether the server closed c without sending anything.
func closedByServer(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection still open")
	}
}

func trustedLB() Config {
	return Config{TrustedUpstreams: clientip.MustParsePrefixSet(lbAddr)}
}

func header(v uint8, src, dst string) Header {
	return Header{Version: v, Command: CommandProxy, Source: ap(src), Destination: ap(dst)}
}

func TestListenerProxyHeader(t *testing.T) {
	for _, v := range []uint8{1, 2} {
		t.Run("v"+string('0'+v), func(t *testing.T) {
			s := newServer(t, trustedLB())
			c := dial(t, lbAddr, s.addr())
			h := header(v, "203.0.113.7:5555", "192.0.2.10:8883")
			if v == 2 {
				h.TLVs = mustTLVs(TLV{TLVAuthority, "mqtt.example.com"})
				h.AddChecksum = true
			}
			b, _ := h.Format()
			// The header and the first application bytes in one segment, as a
			// load balancer relaying a TLS ClientHello sends them.
			if _, err := c.Write(append(b, "hello"...)); err != nil {
				t.Fatal(err)
			}
			sc := s.accept(t)
			f := sc.Facts()
			if f.Version != v || f.Command != CommandProxy || f.Source != ap("203.0.113.7:5555") || f.Destination != ap("192.0.2.10:8883") {
				t.Errorf("Facts = %v", f)
			}
			if f.Peer != c.LocalAddr().(*net.TCPAddr).AddrPort() || f.Local != c.RemoteAddr().(*net.TCPAddr).AddrPort() {
				t.Errorf("socket layer = %v / %v, want %v / %v", f.Peer, f.Local, c.LocalAddr(), c.RemoteAddr())
			}
			if got := sc.RemoteAddr().String(); got != "203.0.113.7:5555" {
				t.Errorf("RemoteAddr = %s, want the PROXY source", got)
			}
			if got := sc.LocalAddr().String(); got != "192.0.2.10:8883" {
				t.Errorf("LocalAddr = %s, want the PROXY destination", got)
			}
			if v == 2 {
				if a, _ := f.TLVs.Authority(); a != "mqtt.example.com" {
					t.Errorf("Authority = %q", a)
				}
			}
			got := make([]byte, 5)
			sc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(sc, got); err != nil || string(got) != "hello" {
				t.Errorf("application bytes = %q, %v; want hello", got, err)
			}
			// clientip sees both layers.
			r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback()})
			res, err := r.Resolve(f.Transport(), nil)
			if err != nil || res.Client != netip.MustParseAddr("203.0.113.7") || res.Source != clientip.SourceProxyProtocol || res.Peer != f.Peer {
				t.Errorf("Resolve = %v, %v", res, err)
			}
			if st := s.l.Stats(); st.Accepted != 1 || st.Proxied != 1 || st.TotalRejected() != 0 {
				t.Errorf("Stats = %+v", st)
			}
		})
	}
}

// A header that is already there when the connection is accepted is judged
// without a goroutine; one that comes later is read by a goroutine under the
// deadline. Both paths give the same result.
func TestListenerInlineAndWaitingPaths(t *testing.T) {
	inner, err := net.Listen("tcp", lbAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewListener(inner, trustedLB())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, _ := header(2, "203.0.113.7:1", "192.0.2.10:2").Format()
	early := dial(t, lbAddr, l.Addr().String())
	early.Write(append(b, "early"...))
	late := dial(t, lbAddr, l.Addr().String())
	waitAcked(t, early)
	for i := range 2 {
		if i == 1 {
			// Not Stats().Pending: it counts the connection as soon as it is
			// accepted, before the listener has looked for a header, and a
			// header written then would be judged inline.
			waitFor(t, "the late connection to wait for its header", func() bool { return l.waited.Load() == 1 })
			late.Write(append(b, "late!"...))
		}
		sc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		got := make([]byte, 5)
		if _, err := io.ReadFull(sc, got); err != nil || sc.RemoteAddr().String() != "203.0.113.7:1" {
			t.Errorf("conn %d: read %q, %v, remote %v", i, got, err, sc.RemoteAddr())
		}
		if i == 0 && l.inline.Load() != 1 {
			t.Errorf("early header not judged inline (inline = %d)", l.inline.Load())
		}
	}
	if n := l.inline.Load(); n != 1 {
		t.Errorf("inline = %d, want 1 (the late header waits in a goroutine)", n)
	}
}

// A v1 line that arrives in pieces is reassembled up to the deadline (the
// spec lets a receiver refuse it; this one waits, bounded by the timeout and
// 107 bytes).
func TestListenerHeaderInPieces(t *testing.T) {
	s := newServer(t, trustedLB())
	c := dial(t, lbAddr, s.addr())
	for _, p := range []string{"PRO", "XY TCP4 203.0.113.7 ", "192.0.2.10 1 2\r", "\nping"} {
		c.Write([]byte(p))
		time.Sleep(5 * time.Millisecond) // separate segments, not synchronisation
	}
	sc := s.accept(t)
	if f := sc.Facts(); f.Source != ap("203.0.113.7:1") {
		t.Errorf("Facts = %v", f)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(sc, got); err != nil || string(got) != "ping" {
		t.Errorf("read %q, %v", got, err)
	}
}

func TestListenerLocal(t *testing.T) {
	for _, v := range []uint8{1, 2} {
		t.Run("v"+string('0'+v), func(t *testing.T) {
			s := newServer(t, trustedLB())
			c := dial(t, lbAddr, s.addr())
			WriteHeader(c, Header{Version: v, Command: CommandLocal})
			sc := s.accept(t)
			f := sc.Facts()
			if f.Command != CommandLocal || f.Version != v || f.Source.IsValid() || f.TLVs.Len() != 0 {
				t.Errorf("Facts = %v", f)
			}
			if sc.RemoteAddr().String() != c.LocalAddr().String() {
				t.Errorf("RemoteAddr = %v, want the socket peer %v", sc.RemoteAddr(), c.LocalAddr())
			}
			if tr := f.Transport(); tr.Proxy.IsValid() {
				t.Errorf("Transport of a LOCAL connection has a PROXY layer: %+v", tr)
			}
			if st := s.l.Stats(); st.Local != 1 {
				t.Errorf("Stats = %+v", st)
			}
		})
	}
}

// Spec section 2: a receiver configured for the protocol must not guess
// whether a header is present.
func TestListenerTrustedWithoutHeaderRefused(t *testing.T) {
	s := newServer(t, trustedLB())
	c := dial(t, lbAddr, s.addr())
	c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	r := s.reject(t)
	if r.Reason != ReasonNoHeader || !errors.Is(r.Err, ErrNoHeader) || !r.Trusted || r.Peer != c.LocalAddr().(*net.TCPAddr).AddrPort() {
		t.Errorf("Rejection = %+v", r)
	}
	closedByServer(t, c)
	if st := s.l.Stats(); st.Rejected[ReasonNoHeader] != 1 || st.Accepted != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

// A TCP health check: connect and close without a byte.
func TestListenerTrustedConnectAndCloseRefused(t *testing.T) {
	s := newServer(t, trustedLB())
	c := dial(t, lbAddr, s.addr())
	c.Close()
	if r := s.reject(t); r.Reason != ReasonNoHeader {
		t.Errorf("Rejection = %+v", r)
	}
}

func TestListenerTrustedWithoutHeaderAllowed(t *testing.T) {
	cfg := trustedLB()
	cfg.Headerless = HeaderlessAllow
	s := newServer(t, cfg)
	c := dial(t, lbAddr, s.addr())
	c.Write([]byte("GET /healthz HTTP/1.1\r\n\r\n"))
	sc := s.accept(t)
	if f := sc.Facts(); f.Version != 0 || f.Command != CommandNone || f.Transport().Proxy.IsValid() {
		t.Errorf("Facts = %v", f)
	}
	got := make([]byte, 3)
	if _, err := io.ReadFull(sc, got); err != nil || string(got) != "GET" {
		t.Errorf("read %q, %v", got, err)
	}
}

func TestListenerUntrustedHeaderClosed(t *testing.T) {
	s := newServer(t, trustedLB())
	for _, v := range []uint8{1, 2} {
		c := dial(t, "127.0.0.66", s.addr())
		WriteHeader(c, header(v, "10.1.2.3:1", "192.0.2.10:443"))
		r := s.reject(t)
		if r.Reason != ReasonUntrusted || !errors.Is(r.Err, ErrUntrustedHeader) || r.Trusted || r.Version != v || r.Peer.Addr() != netip.MustParseAddr("127.0.0.66") {
			t.Errorf("v%d Rejection = %+v", v, r)
		}
		closedByServer(t, c)
	}
	if st := s.l.Stats(); st.Rejected[ReasonUntrusted] != 2 || st.Accepted != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

// The signature alone is enough to refuse an untrusted peer: the rest of the
// header is never waited for.
func TestListenerUntrustedSignatureOnly(t *testing.T) {
	s := newServer(t, trustedLB())
	c := dial(t, "127.0.0.66", s.addr())
	c.Write([]byte(sigV2))
	if r := s.reject(t); r.Reason != ReasonUntrusted || r.Duration > time.Second {
		t.Errorf("Rejection = %+v", r)
	}
}

func TestListenerUntrustedHeaderIgnored(t *testing.T) {
	cfg := trustedLB()
	cfg.Untrusted = UntrustedIgnore
	s := newServer(t, cfg)
	c := dial(t, "127.0.0.66", s.addr())
	b, _ := header(2, "10.1.2.3:1", "192.0.2.10:443").Format()
	c.Write(append(b, "data"...))
	sc := s.accept(t)
	f := sc.Facts()
	if f.Version != 0 || f.Source.IsValid() || f.Peer.Addr() != netip.MustParseAddr("127.0.0.66") {
		t.Errorf("Facts = %v: the untrusted header was believed", f)
	}
	if sc.RemoteAddr().String() != c.LocalAddr().String() {
		t.Errorf("RemoteAddr = %v", sc.RemoteAddr())
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(sc, got); err != nil || string(got) != "data" {
		t.Errorf("read %q, %v", got, err)
	}
	if st := s.l.Stats(); st.Ignored != 1 || st.Proxied != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestListenerUntrustedWithoutHeaderServed(t *testing.T) {
	s := newServer(t, trustedLB())
	c := dial(t, "127.0.0.66", s.addr())
	c.Write([]byte("PUT"))
	sc := s.accept(t)
	got := make([]byte, 3)
	if _, err := io.ReadFull(sc, got); err != nil || string(got) != "PUT" {
		t.Errorf("read %q, %v", got, err)
	}
	r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(lbAddr)})
	if res, err := r.Resolve(sc.Facts().Transport(), nil); err != nil || res.Source != clientip.SourceSocket || res.Client != netip.MustParseAddr("127.0.0.66") {
		t.Errorf("Resolve = %v, %v", res, err)
	}
}

// The zero Config trusts nobody: every header is refused.
func TestListenerZeroConfig(t *testing.T) {
	s := newServer(t, Config{})
	c := dial(t, lbAddr, s.addr())
	WriteHeader(c, header(2, "10.1.2.3:1", "192.0.2.10:443"))
	if r := s.reject(t); r.Reason != ReasonUntrusted {
		t.Errorf("Rejection = %+v", r)
	}
}

func TestListenerInvalidHeader(t *testing.T) {
	s := newServer(t, trustedLB())
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"2.2.5 bad checksum", flipLast(withCRC(v2(0x21, 0x11, addrs4("203.0.113.7", "192.0.2.10", 1, 2)))), ErrChecksum},
		{"2.2.6 long unique id", v2(0x21, 0x11, addrs4("203.0.113.7", "192.0.2.10", 1, 2), tlv(0x05, make([]byte, 129))), ErrUniqueIDTooLong},
		{"2.1 v1 without CRLF in 107 bytes", []byte("PROXY TCP4 " + strings.Repeat("1", 120)), ErrInvalidHeader},
		{"2.2 v2 longer than 4096", v2(0x21, 0x11, addrs4("203.0.113.7", "192.0.2.10", 1, 2), tlv(0x04, make([]byte, 4100))), ErrInvalidHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, lbAddr, s.addr())
			c.Write(tt.in)
			r := s.reject(t)
			if r.Reason != ReasonInvalid || !errors.Is(r.Err, tt.want) {
				t.Errorf("Rejection = %+v", r)
			}
			closedByServer(t, c)
		})
	}
}

func TestListenerIncomplete(t *testing.T) {
	s := newServer(t, trustedLB())
	c := dial(t, lbAddr, s.addr())
	b, _ := header(2, "203.0.113.7:1", "192.0.2.10:2").Format()
	c.Write(b[:20])
	c.(*net.TCPConn).CloseWrite()
	if r := s.reject(t); r.Reason != ReasonIncomplete || r.Version != 2 || !errors.Is(r.Err, ErrIncomplete) {
		t.Errorf("Rejection = %+v", r)
	}
}

func TestListenerTimeout(t *testing.T) {
	cfg := trustedLB()
	cfg.ReadHeaderTimeout = 200 * time.Millisecond
	s := newServer(t, cfg)
	for _, first := range []string{"", "PROXY TCP4 "} {
		c := dial(t, lbAddr, s.addr())
		c.Write([]byte(first))
		r := s.reject(t)
		if r.Reason != ReasonTimeout || !errors.Is(r.Err, ErrTimeout) || r.Duration < cfg.ReadHeaderTimeout {
			t.Errorf("after %q: Rejection = %+v", first, r)
		}
		closedByServer(t, c)
	}
}

// A silent client does not hold up Accept for the next one.
func TestListenerSilentClientDoesNotBlockAccept(t *testing.T) {
	s := newServer(t, trustedLB())
	silent := dial(t, lbAddr, s.addr())
	_ = silent
	c := dial(t, lbAddr, s.addr())
	WriteHeader(c, header(2, "203.0.113.7:1", "192.0.2.10:2"))
	start := time.Now()
	s.accept(t)
	if d := time.Since(start); d > time.Second {
		t.Errorf("accept took %v behind a silent client", d)
	}
}

func TestListenerClose(t *testing.T) {
	base := runtime.NumGoroutine()
	inner, err := net.Listen("tcp", lbAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewListener(inner, trustedLB())
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := l.Accept(); errc <- err }()
	// Connections waiting for their header when the listener closes.
	var silent []net.Conn
	for range 5 {
		silent = append(silent, dial(t, lbAddr, l.Addr().String()))
	}
	waitFor(t, "pending connections", func() bool { return l.Stats().Pending == 5 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still blocked after Close")
	}
	for _, c := range silent {
		closedByServer(t, c)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Accept = %v", err)
	}
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= base })
	waitFor(t, "pending connections to drain", func() bool { return l.Stats().Pending == 0 })
	if st := l.Stats(); st.TotalRejected() != 0 {
		t.Errorf("Stats after Close = %+v (closing is not a rejection)", st)
	}
}

func TestNewListenerConfig(t *testing.T) {
	inner, err := net.Listen("tcp", lbAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"negative ReadHeaderTimeout", Config{ReadHeaderTimeout: -1}},
		{"negative MaxPending", Config{MaxPending: -1}},
		{"unknown Headerless", Config{Headerless: 7}},
		{"unknown Untrusted", Config{Untrusted: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewListener(inner, tt.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := NewListener(nil, Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil inner: err = %v", err)
	}
	if _, err := NewListener(inner, Config{}); err != nil {
		t.Errorf("zero Config: %v", err)
	}
}

// Bytes that arrived with the header are not lost by io.Copy (go-proxyproto
// v0.15.0's Conn.WriteTo bug, #181, is not reachable here).
func TestConnWriteToDrainsBufferedBytes(t *testing.T) {
	s := newServer(t, trustedLB())
	c := dial(t, lbAddr, s.addr())
	b, _ := header(2, "203.0.113.7:1", "192.0.2.10:2").Format()
	c.Write(append(b, "first-"...))
	sc := s.accept(t)
	go func() {
		time.Sleep(10 * time.Millisecond)
		c.Write([]byte("second"))
		c.(*net.TCPConn).CloseWrite()
	}()
	var out bytes.Buffer
	if _, err := io.Copy(&out, sc); err != nil {
		t.Fatal(err)
	}
	if out.String() != "first-second" {
		t.Errorf("io.Copy read %q", out.String())
	}
}

func TestListenerUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pp.sock")
	inner, err := net.Listen("unix", path)
	if err != nil {
		e2e.Unavailable(t, "unix sockets unavailable: "+err.Error())
	}
	l, err := NewListener(inner, Config{TrustUnixSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := DialContext(context.Background(), nil, "unix", path, header(2, "203.0.113.7:1", "192.0.2.10:2"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	f, _ := FactsFromConn(sc)
	if f.Peer.IsValid() || f.Source != ap("203.0.113.7:1") {
		t.Errorf("Facts = %v", f)
	}
	r := clientip.MustNew(clientip.Config{TrustUnixSocket: true})
	if res, err := r.Resolve(f.Transport(), nil); err != nil || res.Source != clientip.SourceProxyProtocol {
		t.Errorf("Resolve = %v, %v", res, err)
	}
}

// ConnContext hands the connection's layers to net/http handlers, under TLS.
func TestConnContextHTTPOverTLS(t *testing.T) {
	inner, err := net.Listen("tcp", lbAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewListener(inner, trustedLB())
	if err != nil {
		t.Fatal(err)
	}
	resolver := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(lbAddr)})
	srv := &http.Server{
		ConnContext: ConnContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f, _ := FactsFromContext(r.Context())
			res, err := resolver.ResolveRequest(r)
			io.WriteString(w, res.String()+" | "+f.Peer.Addr().String()+" | "+r.RemoteAddr+" | "+errString(err))
		}),
	}
	go srv.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{selfSigned()}}))
	defer srv.Close()

	tr := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialContext(ctx, &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(lbAddr)}}, network, addr,
				header(2, "203.0.113.7:4444", "192.0.2.10:443"))
		},
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := "203.0.113.7 from proxy-protocol hop 1 via 127.0.0.1"
	if !strings.HasPrefix(string(body), want) || !strings.Contains(string(body), "| 127.0.0.1 | 203.0.113.7:4444 | <nil>") {
		t.Errorf("body = %q, want prefix %q", body, want)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestFactsFromConn(t *testing.T) {
	f := Facts{Version: 2, Command: CommandProxy, Source: ap("203.0.113.7:1")}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	c := newConn(p1, f, nil)
	for _, nc := range []net.Conn{c, tls.Server(c, &tls.Config{}), tls.Client(c, &tls.Config{})} {
		if got, ok := FactsFromConn(nc); !ok || got != f {
			t.Errorf("FactsFromConn(%T) = %v, %v", nc, got, ok)
		}
	}
	if _, ok := FactsFromConn(p1); ok {
		t.Error("FactsFromConn found facts on a plain connection")
	}
	if _, ok := FactsFromContext(context.Background()); ok {
		t.Error("FactsFromContext found facts in an empty context")
	}
	ctx := ConnContext(context.Background(), c)
	if got, ok := FactsFromContext(ctx); !ok || got != f {
		t.Errorf("FactsFromContext = %v, %v", got, ok)
	}
	if tr, ok := clientip.TransportFromContext(ctx); !ok || tr != f.Transport() {
		t.Errorf("TransportFromContext = %+v, %v", tr, ok)
	}
	if got := ConnContext(context.Background(), p1); got != context.Background() {
		t.Error("ConnContext changed the context of a plain connection")
	}
	if allocs := testing.AllocsPerRun(100, func() { FactsFromConn(c) }); allocs != 0 {
		t.Errorf("FactsFromConn allocates %v times", allocs)
	}
}

// waitFor polls cond until it holds or 10 seconds pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// DialContext fills a PROXY header's empty addresses from the connection.
func TestDialContextFillsAddresses(t *testing.T) {
	s := newServer(t, trustedLB())
	c, err := DialContext(context.Background(), &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(lbAddr)}}, "tcp", s.addr(),
		Header{Version: 2, Command: CommandProxy})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := s.accept(t).Facts()
	if f.Source.String() != c.LocalAddr().String() || f.Destination.String() != c.RemoteAddr().String() {
		t.Errorf("Facts = %v, want %v -> %v", f, c.LocalAddr(), c.RemoteAddr())
	}
	if _, err := DialContext(context.Background(), nil, "tcp", s.addr(), Header{Version: 9}); !errors.Is(err, ErrInvalidHeaderValue) {
		t.Errorf("bad header: %v", err)
	}
}

// dialUnixNamed connects to the Unix socket at path from a client socket bound
// to the relative path name, which a client may choose freely: "127.0.0.1:9"
// reads like a loopback address.
func dialUnixNamed(t *testing.T, name, path string) *net.UnixConn {
	t.Helper()
	t.Chdir(t.TempDir())
	c, err := net.DialUnix("unix", &net.UnixAddr{Name: name, Net: "unix"}, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		e2e.Unavailable(t, "cannot bind a Unix client socket: "+err.Error())
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Spoofing trick: a local client binds its Unix socket to the path
// "127.0.0.1:9", so that the connection's remote address prints as a trusted
// loopback proxy. It is a Unix peer all the same: untrusted here, so its
// header is refused (found by the project's review, 2026-12-02).
func TestListenerUnixPeerNamedLikeAnIP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pp.sock")
	inner, err := net.Listen("unix", path)
	if err != nil {
		e2e.Unavailable(t, "unix sockets unavailable: "+err.Error())
	}
	rejected := make(chan Rejection, 1)
	l, err := NewListener(inner, Config{
		TrustedUpstreams: clientip.MustParsePrefixSet("127.0.0.0/8"),
		OnReject:         func(r Rejection) { rejected <- r },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			f, _ := FactsFromConn(c)
			t.Errorf("accepted, with %v", f)
			c.Close()
		}
	}()
	c := dialUnixNamed(t, "127.0.0.1:9", path)
	if c.LocalAddr().String() != "127.0.0.1:9" {
		e2e.Unavailable(t, fmt.Sprintf("client socket bound as %q", c.LocalAddr()))
	}
	c.Write([]byte("PROXY TCP4 203.0.113.66 192.0.2.1 1234 80\r\nhello"))
	select {
	case r := <-rejected:
		if r.Reason != ReasonUntrusted || r.Trusted || r.Peer.IsValid() {
			t.Errorf("rejection = %+v, want an untrusted peer without an IP address", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no rejection within 5s")
	}
	closedByServer(t, c)
}
