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
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, err)
	s := &server{accepted: make(chan *Conn, 128), rejected: make(chan Rejection, 2048)}
	cfg.OnReject = func(r Rejection) { s.rejected <- r }
	s.l, err = NewListener(inner, cfg)
	require.NoError(t, err)
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
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// newListener starts a Listener on loopback under cfg, closed at the end of
// the test; nothing accepts from it until the test does.
func newListener(t testing.TB, cfg Config) *Listener {
	t.Helper()
	inner, err := net.Listen("tcp", lbAddr+":0")
	require.NoError(t, err)
	l, err := NewListener(inner, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// assertReads checks that the next bytes read from c are want.
func assertReads(t testing.TB, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	_, err := io.ReadFull(c, got)
	require.NoError(t, err)
	assert.Equal(t, want, string(got))
}

func (s *server) accept(t testing.TB) *Conn {
	t.Helper()
	select {
	case c := <-s.accepted:
		t.Cleanup(func() { c.Close() })
		return c
	case r := <-s.rejected:
		require.Failf(t, "rejected instead of accepted", "%+v", r)
	case <-time.After(5 * time.Second):
		require.Fail(t, "no connection accepted within 5s")
	}
	return nil
}

func (s *server) reject(t testing.TB) Rejection {
	t.Helper()
	select {
	case r := <-s.rejected:
		return r
	case c := <-s.accepted:
		require.Failf(t, "accepted instead of rejected", "%v", c.Facts())
	case <-time.After(5 * time.Second):
		require.Fail(t, "no rejection within 5s")
	}
	return Rejection{}
}

// closedByServer checks that the server closed c without sending anything.
func closedByServer(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	require.Zero(t, n, "bytes from a connection that should be closed")
	require.Error(t, err, "connection not closed")
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "connection still open")
}

func trustedLB() Config {
	return Config{Trust: trustOf(lbAddr)}
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
			_, err := c.Write(append(b, "hello"...))
			require.NoError(t, err)
			sc := s.accept(t)
			f := sc.Facts()
			assert.Equal(t, v, f.Version)
			assert.Equal(t, CommandProxy, f.Command)
			assert.Equal(t, ap("203.0.113.7:5555"), f.Source)
			assert.Equal(t, ap("192.0.2.10:8883"), f.Destination)
			assert.Equal(t, c.LocalAddr().(*net.TCPAddr).AddrPort(), f.Peer, "socket peer")
			assert.Equal(t, c.RemoteAddr().(*net.TCPAddr).AddrPort(), f.Local, "socket local address")
			assert.Equal(t, "203.0.113.7:5555", sc.RemoteAddr().String(), "RemoteAddr is the PROXY source")
			assert.Equal(t, "192.0.2.10:8883", sc.LocalAddr().String(), "LocalAddr is the PROXY destination")
			if v == 2 {
				a, _ := f.TLVs.Authority()
				assert.Equal(t, "mqtt.example.com", a)
			}
			assertReads(t, sc, "hello")
			// clientip sees both layers.
			r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback()})
			res, err := r.Resolve(f.Transport(), nil)
			require.NoError(t, err)
			assert.Equal(t, netip.MustParseAddr("203.0.113.7"), res.Client)
			assert.Equal(t, clientip.SourceProxyProtocol, res.Source)
			assert.Equal(t, f.Peer, res.Peer)
			st := s.l.Stats()
			assert.Equal(t, uint64(1), st.Accepted)
			assert.Equal(t, uint64(1), st.Proxied)
			assert.Zero(t, st.TotalRejected())
		})
	}
}

// A header that is already there when the connection is accepted is judged
// without a goroutine; one that comes later is read by a goroutine under the
// deadline. Both paths give the same result.
func TestListenerInlineAndWaitingPaths(t *testing.T) {
	l := newListener(t, trustedLB())
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
		require.NoError(t, err)
		defer sc.Close()
		assertReads(t, sc, []string{"early", "late!"}[i])
		assert.Equal(t, "203.0.113.7:1", sc.RemoteAddr().String())
		if i == 0 {
			assert.Equal(t, uint64(1), l.inline.Load(), "the early header is judged inline")
		}
	}
	assert.Equal(t, uint64(1), l.inline.Load(), "the late header waits in a goroutine")
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
	assert.Equal(t, ap("203.0.113.7:1"), sc.Facts().Source)
	assertReads(t, sc, "ping")
}

func TestListenerLocal(t *testing.T) {
	for _, v := range []uint8{1, 2} {
		t.Run("v"+string('0'+v), func(t *testing.T) {
			s := newServer(t, trustedLB())
			c := dial(t, lbAddr, s.addr())
			WriteHeader(c, Header{Version: v, Command: CommandLocal})
			sc := s.accept(t)
			f := sc.Facts()
			assert.Equal(t, Facts{Peer: f.Peer, Local: f.Local, Version: v, Command: CommandLocal}, f, "a LOCAL header carries nothing")
			assert.Equal(t, c.LocalAddr().String(), sc.RemoteAddr().String(), "RemoteAddr is the socket peer")
			assert.False(t, f.Transport().Proxy.IsValid(), "a PROXY layer from a LOCAL header")
			assert.Equal(t, uint64(1), s.l.Stats().Local)
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
	assert.Equal(t, ReasonNoHeader, r.Reason)
	assert.ErrorIs(t, r.Err, ErrNoHeader)
	assert.True(t, r.Trusted)
	assert.Equal(t, c.LocalAddr().(*net.TCPAddr).AddrPort(), r.Peer)
	closedByServer(t, c)
	st := s.l.Stats()
	assert.Equal(t, uint64(1), st.Rejected[ReasonNoHeader])
	assert.Zero(t, st.Accepted)
}

// A TCP health check: connect and close without a byte.
func TestListenerTrustedConnectAndCloseRefused(t *testing.T) {
	s := newServer(t, trustedLB())
	c := dial(t, lbAddr, s.addr())
	c.Close()
	assert.Equal(t, ReasonNoHeader, s.reject(t).Reason)
}

func TestListenerTrustedWithoutHeaderAllowed(t *testing.T) {
	cfg := trustedLB()
	cfg.Headerless = HeaderlessAllow
	s := newServer(t, cfg)
	c := dial(t, lbAddr, s.addr())
	c.Write([]byte("GET /healthz HTTP/1.1\r\n\r\n"))
	sc := s.accept(t)
	f := sc.Facts()
	assert.Equal(t, Facts{Peer: f.Peer, Local: f.Local}, f, "a headerless connection's facts are its socket's")
	assertReads(t, sc, "GET")
}

// A load balancer listed in Upstreams (it speaks PROXY and writes no
// forwarding header) that sends no header relays its client's bytes as they
// came: the facts say so, and Transport ends the walk at the load balancer
// (ProxyLocal) so that a forwarding header in those bytes is never read.
// Without Upstreams the listener cannot tell such a load balancer from a
// proxy that writes forwarding headers, and says nothing.
func TestListenerUpstreamWithoutHeader(t *testing.T) {
	for _, listed := range []bool{true, false} {
		cfg := trustedLB()
		cfg.Headerless = HeaderlessAllow
		if listed {
			cfg.Upstreams = clientip.MustParsePrefixSet(lbAddr + "/32")
		}
		s := newServer(t, cfg)
		c := dial(t, lbAddr, s.addr())
		c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		f := s.accept(t).Facts()
		assert.Equal(t, listed, f.NoHeaderFromUpstream, "Upstreams listed: %v", listed)
		assert.Equal(t, listed, f.Transport().ProxyLocal, "Upstreams listed: %v", listed)
	}
}

func TestListenerUntrustedHeaderClosed(t *testing.T) {
	s := newServer(t, trustedLB())
	for _, v := range []uint8{1, 2} {
		c := dial(t, "127.0.0.66", s.addr())
		WriteHeader(c, header(v, "10.1.2.3:1", "192.0.2.10:443"))
		r := s.reject(t)
		assert.Equal(t, ReasonUntrusted, r.Reason)
		assert.ErrorIs(t, r.Err, ErrUntrustedHeader)
		assert.False(t, r.Trusted)
		assert.Equal(t, v, r.Version)
		assert.Equal(t, netip.MustParseAddr("127.0.0.66"), r.Peer.Addr())
		closedByServer(t, c)
	}
	st := s.l.Stats()
	assert.Equal(t, uint64(2), st.Rejected[ReasonUntrusted])
	assert.Zero(t, st.Accepted)
}

// The signature alone is enough to refuse an untrusted peer: the rest of the
// header is never waited for.
func TestListenerUntrustedSignatureOnly(t *testing.T) {
	s := newServer(t, trustedLB())
	c := dial(t, "127.0.0.66", s.addr())
	c.Write([]byte(sigV2))
	r := s.reject(t)
	assert.Equal(t, ReasonUntrusted, r.Reason)
	assert.Less(t, r.Duration, time.Second, "refused before the deadline, not at it")
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
	assert.Equal(t, Facts{Peer: f.Peer, Local: f.Local, PeerUntrusted: true}, f, "the untrusted header was believed")
	assert.Equal(t, netip.MustParseAddr("127.0.0.66"), f.Peer.Addr())
	assert.Equal(t, c.LocalAddr().String(), sc.RemoteAddr().String())
	assertReads(t, sc, "data")
	st := s.l.Stats()
	assert.Equal(t, uint64(1), st.Ignored)
	assert.Zero(t, st.Proxied)
}

func TestListenerUntrustedWithoutHeaderServed(t *testing.T) {
	s := newServer(t, trustedLB())
	c := dial(t, "127.0.0.66", s.addr())
	c.Write([]byte("PUT"))
	sc := s.accept(t)
	assertReads(t, sc, "PUT")
	r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(lbAddr)})
	res, err := r.Resolve(sc.Facts().Transport(), nil)
	require.NoError(t, err)
	assert.Equal(t, clientip.SourceSocket, res.Source)
	assert.Equal(t, netip.MustParseAddr("127.0.0.66"), res.Client)
}

// The zero Config trusts nobody: every header is refused.
func TestListenerZeroConfig(t *testing.T) {
	s := newServer(t, Config{})
	c := dial(t, lbAddr, s.addr())
	WriteHeader(c, header(2, "10.1.2.3:1", "192.0.2.10:443"))
	assert.Equal(t, ReasonUntrusted, s.reject(t).Reason)
}

func TestListenerInvalidHeader(t *testing.T) {
	s := newServer(t, trustedLB())
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"2.2.3 bad checksum", flipLast(withCRC(v2(0x21, 0x11, addrs4("203.0.113.7", "192.0.2.10", 1, 2)))), ErrChecksum},
		{"2.2.5 long unique id", v2(0x21, 0x11, addrs4("203.0.113.7", "192.0.2.10", 1, 2), tlv(0x05, make([]byte, 129))), ErrUniqueIDTooLong},
		{"2.1 v1 without CRLF in 107 bytes", []byte("PROXY TCP4 " + strings.Repeat("1", 120)), ErrInvalidHeader},
		{"2.2 v2 longer than 4096", v2(0x21, 0x11, addrs4("203.0.113.7", "192.0.2.10", 1, 2), tlv(0x04, make([]byte, 4100))), ErrHeaderTooLong},
		{"2.2.6 malformed SSL TLV", v2(0x21, 0x11, addrs4("203.0.113.7", "192.0.2.10", 1, 2), tlv(0x20, []byte{0x01, 0, 0, 0, 0})), ErrInvalidSSL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, lbAddr, s.addr())
			c.Write(tt.in)
			r := s.reject(t)
			assert.Equal(t, ReasonInvalid, r.Reason)
			assert.ErrorIs(t, r.Err, tt.want)
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
	r := s.reject(t)
	assert.Equal(t, ReasonIncomplete, r.Reason)
	assert.Equal(t, uint8(2), r.Version)
	assert.ErrorIs(t, r.Err, ErrIncomplete)
}

func TestListenerTimeout(t *testing.T) {
	cfg := trustedLB()
	cfg.ReadHeaderTimeout = 200 * time.Millisecond
	s := newServer(t, cfg)
	for _, first := range []string{"", "PROXY TCP4 "} {
		c := dial(t, lbAddr, s.addr())
		c.Write([]byte(first))
		r := s.reject(t)
		assert.Equal(t, ReasonTimeout, r.Reason, "after %q", first)
		assert.ErrorIs(t, r.Err, ErrTimeout)
		assert.GreaterOrEqual(t, r.Duration, cfg.ReadHeaderTimeout, "refused before the deadline")
		closedByServer(t, c)
	}
}

// A silent client does not hold up Accept for the next one: with a deadline
// no test outlasts, the next connection is accepted while the silent one
// still waits.
func TestListenerSilentClientDoesNotBlockAccept(t *testing.T) {
	cfg := trustedLB()
	cfg.ReadHeaderTimeout = time.Hour
	s := newServer(t, cfg)
	dial(t, lbAddr, s.addr()) // silent
	c := dial(t, lbAddr, s.addr())
	WriteHeader(c, header(2, "203.0.113.7:1", "192.0.2.10:2"))
	s.accept(t)
	st := s.l.Stats()
	assert.Equal(t, 1, st.Pending, "the silent client still waits")
	assert.Zero(t, st.TotalRejected())
}

// Stats is exact when Accept returns: the connection it returns is counted in
// Accepted and no longer in Pending. Its slot was freed by the goroutine that
// handed it over, just after the handover, so Stats could still count it as
// pending for a moment (the flaky TestListenerSilentClientDoesNotBlockAccept
// in CI); here the connection waits for Accept before Accept is called, the
// order in which that goroutine ran last.
func TestListenerStatsExactWhenAcceptReturns(t *testing.T) {
	l := newListener(t, trustedLB())
	for i := range 100 {
		c := dial(t, lbAddr, l.Addr().String())
		require.NoError(t, WriteHeader(c, header(2, "203.0.113.7:1", "192.0.2.10:2")))
		if i > 0 { // the first Accept starts the listener
			waitFor(t, "the connection to wait for Accept", func() bool { return l.Stats().Pending == 1 })
		}
		sc, err := l.Accept()
		require.NoError(t, err)
		st := l.Stats()
		sc.Close()
		require.Equal(t, uint64(i+1), st.Accepted, "connection %d", i)
		require.Zero(t, st.Pending, "connection %d: Pending when Accept returned", i)
	}
}

// A connection refused while its header was awaited gives its pending slot
// back before OnReject runs: the connection is closed, and a slow or stuck
// callback must not hold the budget that live connections need. It held its
// trusted slot until OnReject returned, so with MaxPending 1 the load
// balancer's next connection was not accepted while the callback was stuck
// (Stats counted the closed connection as pending).
func TestListenerOnRejectHoldsNoSlot(t *testing.T) {
	stuck := make(chan struct{})
	called := make(chan Stats, 1)
	var l *Listener
	cfg := trustedLB()
	cfg.MaxPending = 1
	cfg.ReadHeaderTimeout = 100 * time.Millisecond
	cfg.OnReject = func(Rejection) {
		called <- l.Stats()
		<-stuck
	}
	l = newListener(t, cfg)
	defer close(stuck) // before the listener's cleanup closes it
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c
		}
	}()
	dial(t, lbAddr, l.Addr().String()) // silent: refused at the deadline
	st := <-called
	assert.Zero(t, st.Pending, "pending while OnReject runs: %+v", st)
	c := dial(t, lbAddr, l.Addr().String())
	require.NoError(t, WriteHeader(c, header(2, "203.0.113.7:1", "192.0.2.10:2")))
	select {
	case sc := <-accepted:
		sc.Close()
	case <-time.After(5 * time.Second):
		require.Fail(t, "the next connection was not accepted while OnReject was stuck")
	}
}

// A flood of refused connections behind a slow OnReject does not pile up
// goroutines: every rejection ran the callback on a goroutine of its own (or
// kept its header-reading goroutine) until the callback returned, so a stuck
// callback held one goroutine per refused connection, without bound. At most
// MaxOnReject calls run at once; the rest are counted in Stats.Unreported.
func TestListenerOnRejectFloodBounded(t *testing.T) {
	const (
		flood = 200
		limit = 4
	)
	stuck := make(chan struct{})
	var running, calls atomic.Int64
	cfg := trustedLB()
	cfg.MaxOnReject = limit
	cfg.OnReject = func(Rejection) {
		running.Add(1)
		calls.Add(1)
		<-stuck
		running.Add(-1)
	}
	l := newListener(t, cfg)
	defer close(stuck) // before the listener's cleanup closes it
	go l.Accept()
	// Trusted connections without a header, refused under HeaderlessRefuse:
	// some judged as they arrive, some by the goroutine that waits for
	// their first bytes.
	base := runtime.NumGoroutine()
	for i := range flood {
		_, err := dial(t, lbAddr, l.Addr().String()).Write([]byte("GET / HTTP/1.1\r\n"))
		require.NoError(t, err, "connection %d", i)
	}
	waitFor(t, "every connection to be refused, then reported or counted", func() bool {
		st := l.Stats()
		return st.TotalRejected() == flood && calls.Load()+int64(st.Unreported) == flood
	})
	// Without the bound, one goroutine per refused connection stays behind
	// the stuck callback and this never holds.
	waitFor(t, "the refused connections' goroutines to end", func() bool { return runtime.NumGoroutine() <= base+limit+8 })
	st := l.Stats()
	assert.Equal(t, uint64(flood), st.Rejected[ReasonNoHeader], "%+v", st)
	assert.Equal(t, int64(limit), calls.Load(), "OnReject calls")
	assert.Equal(t, int64(limit), running.Load(), "OnReject calls running")
	assert.Equal(t, uint64(flood-limit), st.Unreported, "rejections not reported")
}

func TestListenerClose(t *testing.T) {
	base := runtime.NumGoroutine()
	inner, err := net.Listen("tcp", lbAddr+":0")
	require.NoError(t, err)
	l, err := NewListener(inner, trustedLB())
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { _, err := l.Accept(); errc <- err }()
	// Connections waiting for their header when the listener closes.
	var silent []net.Conn
	for range 5 {
		silent = append(silent, dial(t, lbAddr, l.Addr().String()))
	}
	waitFor(t, "pending connections", func() bool { return l.Stats().Pending == 5 })
	require.NoError(t, l.Close())
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, net.ErrClosed, "Accept after Close")
	case <-time.After(5 * time.Second):
		require.Fail(t, "Accept still blocked after Close")
	}
	for _, c := range silent {
		closedByServer(t, c)
	}
	_, err = l.Accept()
	assert.ErrorIs(t, err, net.ErrClosed, "second Accept")
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= base })
	waitFor(t, "pending connections to drain", func() bool { return l.Stats().Pending == 0 })
	assert.Zero(t, l.Stats().TotalRejected(), "closing is not a rejection")
}

func TestNewListenerConfig(t *testing.T) {
	inner, err := net.Listen("tcp", lbAddr+":0")
	require.NoError(t, err)
	defer inner.Close()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"negative ReadHeaderTimeout", Config{ReadHeaderTimeout: -1}},
		{"negative MaxPending", Config{MaxPending: -1}},
		{"negative MaxPendingUntrusted", Config{MaxPendingUntrusted: -1}},
		{"negative MaxPendingPerSource", Config{MaxPendingPerSource: -1}},
		{"negative MaxOnReject", Config{MaxOnReject: -1}},
		{"unknown Headerless", Config{Headerless: 7}},
		{"unknown Untrusted", Config{Untrusted: 7}},
		{"MaxHeaderBytes below the default", Config{MaxHeaderBytes: MaxHeaderLen - 1}},
		{"MaxHeaderBytes above 16+65535", Config{MaxHeaderBytes: MaxHeaderBytesLimit + 1}},
		{"negative MaxHeaderBytes", Config{MaxHeaderBytes: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewListener(inner, tt.cfg)
			assert.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
	_, err = NewListener(nil, Config{})
	assert.ErrorIs(t, err, ErrInvalidConfig, "nil inner")
	l, err := NewListener(inner, Config{})
	require.NoError(t, err, "zero Config")
	assert.Equal(t, DefaultMaxPending, cap(l.slots))
	assert.Equal(t, DefaultMaxPendingUntrusted, l.untrust.max)
	assert.Equal(t, DefaultMaxPendingPerSource, l.untrust.perSource)
	assert.Equal(t, DefaultMaxOnReject, cap(l.reporting))
	assert.Equal(t, DefaultReadHeaderTimeout, l.timeout)
	assert.Equal(t, MaxV2Payload, l.maxV2)
	l, err = NewListener(inner, Config{MaxHeaderBytes: MaxHeaderBytesLimit})
	require.NoError(t, err, "MaxHeaderBytes at the spec's limit")
	assert.Equal(t, 0xffff, l.maxV2)
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
	_, err := io.Copy(&out, sc)
	require.NoError(t, err)
	assert.Equal(t, "first-second", out.String())
}

func TestListenerUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pp.sock")
	inner, err := net.Listen("unix", path)
	if err != nil {
		e2e.Unavailable(t, "unix sockets unavailable: "+err.Error())
	}
	r := clientip.MustNew(clientip.Config{TrustUnixSocket: true})
	l, err := NewListener(inner, Config{Trust: r})
	require.NoError(t, err)
	defer l.Close()
	c, err := DialContext(context.Background(), nil, "unix", path, header(2, "203.0.113.7:1", "192.0.2.10:2"))
	require.NoError(t, err)
	defer c.Close()
	sc, err := l.Accept()
	require.NoError(t, err)
	defer sc.Close()
	f, _ := FactsFromConn(sc)
	assert.False(t, f.Peer.IsValid(), "a Unix peer has no address")
	assert.Equal(t, ap("203.0.113.7:1"), f.Source)
	res, err := ResolverFromConn(sc, r).Resolve(f.Transport(), nil)
	require.NoError(t, err)
	assert.Equal(t, clientip.SourceProxyProtocol, res.Source)
}

// ConnContext hands the connection's layers to net/http handlers, under TLS.
func TestConnContextHTTPOverTLS(t *testing.T) {
	l := newListener(t, trustedLB())
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
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.True(t, strings.HasPrefix(string(body), "203.0.113.7 from proxy-protocol hop 1 via 127.0.0.1"), "body %q", body)
	assert.Contains(t, string(body), "| 127.0.0.1 | 203.0.113.7:4444 | <nil>")
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
		wantFound(t, f)(FactsFromConn(nc))
	}
	_, ok := FactsFromConn(p1)
	assert.False(t, ok, "FactsFromConn found facts on a plain connection")
	_, ok = FactsFromContext(context.Background())
	assert.False(t, ok, "FactsFromContext found facts in an empty context")
	ctx := ConnContext(context.Background(), c)
	wantFound(t, f)(FactsFromContext(ctx))
	wantFound(t, f.Transport())(clientip.TransportFromContext(ctx))
	assert.Equal(t, context.Background(), ConnContext(context.Background(), p1), "ConnContext changed the context of a plain connection")
	assert.Zero(t, testing.AllocsPerRun(100, func() { FactsFromConn(c) }), "FactsFromConn allocations")
	assert.Zero(t, testing.AllocsPerRun(100, func() { FactsFromContext(ctx) }), "FactsFromContext allocations")
}

// wrapped is a connection wrapper with a NetConn method, like those
// middleware put around accepted connections.
type wrapped struct{ net.Conn }

func (w *wrapped) NetConn() net.Conn { return w.Conn }

// A nil connection of a concrete type (a nil *tls.Conn, a nil pointer to a
// wrapper, a wrapper around one) has no Facts: FactsFromConn, ConnContext and
// ResolverFromConn called NetConn on it, which dereferenced nil and panicked.
func TestFactsFromConnTypedNil(t *testing.T) {
	r := trustOf(lbAddr)
	tests := []struct {
		name string
		c    net.Conn
	}{
		{"nil interface", nil},
		{"nil *Conn", (*Conn)(nil)},
		{"nil *tls.Conn", (*tls.Conn)(nil)},
		{"nil wrapper", (*wrapped)(nil)},
		{"wrapper around a nil *tls.Conn", &wrapped{(*tls.Conn)(nil)}},
		{"wrapper around a nil wrapper", &wrapped{(*wrapped)(nil)}},
		{"tls.Conn around a nil wrapper", tls.Server((*wrapped)(nil), &tls.Config{})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotPanics(t, func() {
				_, ok := FactsFromConn(tt.c)
				assert.False(t, ok, "FactsFromConn")
				ctx := context.Background()
				assert.Equal(t, ctx, ConnContext(ctx, tt.c), "ConnContext")
				assert.Same(t, r, ResolverFromConn(tt.c, r), "ResolverFromConn")
			})
		})
	}
}

// waitFor polls cond until it holds or 10 seconds pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			require.Failf(t, "timed out", "waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// DialContext fills a PROXY header's empty addresses from the connection.
func TestDialContextFillsAddresses(t *testing.T) {
	s := newServer(t, trustedLB())
	c, err := DialContext(context.Background(), &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(lbAddr)}}, "tcp", s.addr(),
		Header{Version: 2, Command: CommandProxy})
	require.NoError(t, err)
	defer c.Close()
	f := s.accept(t).Facts()
	assert.Equal(t, c.LocalAddr().String(), f.Source.String())
	assert.Equal(t, c.RemoteAddr().String(), f.Destination.String())
	_, err = DialContext(context.Background(), nil, "tcp", s.addr(), Header{Version: 9})
	assert.ErrorIs(t, err, ErrInvalidHeaderValue, "bad header")
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
		Trust:    trustOf("127.0.0.0/8"),
		OnReject: func(r Rejection) { rejected <- r },
	})
	require.NoError(t, err)
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			f, _ := FactsFromConn(c)
			assert.Fail(t, "accepted", "with %v", f)
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
		assert.Equal(t, ReasonUntrusted, r.Reason)
		assert.False(t, r.Trusted)
		assert.False(t, r.Peer.IsValid(), "a Unix peer has no IP address")
	case <-time.After(5 * time.Second):
		require.Fail(t, "no rejection within 5s")
	}
	closedByServer(t, c)
}
