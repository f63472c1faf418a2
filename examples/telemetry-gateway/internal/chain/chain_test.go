package chain

import (
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type hook struct {
	infos chan *Info
}

func (h *hook) Connect(cl *ingest.Client, _ *mqttwire.Connect) (byte, string) {
	info, ok := InfoFromConn(cl.Conn)
	if !ok {
		return mqttwire.UnspecifiedError, "no info"
	}
	info.MarkConnected()
	h.infos <- info
	return 0, ""
}
func (h *hook) Established(*ingest.Client) {}
func (h *hook) Publish(*ingest.Client, *mqttwire.Publish) (byte, string, bool) {
	return 0, "", true
}
func (h *hook) Disconnected(*ingest.Client, error) {}

type fixture struct {
	ln       *Listener
	srv      *ingest.Server
	close    func()
	addr     string
	ca       *pki.CA
	failures chan Failure
	infos    chan *Info
}

func start(t *testing.T, hs, connect time.Duration) *fixture {
	t.Helper()
	ca, err := pki.NewCA("test CA")
	require.NoError(t, err)
	cert, err := ca.Server("gateway.test", "127.0.0.1")
	require.NoError(t, err)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	pl, err := proxyproto.NewListener(tcp, proxyproto.Config{Trust: clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback()})})
	require.NoError(t, err)
	f := &fixture{addr: tcp.Addr().String(), ca: ca, failures: make(chan Failure, 16), infos: make(chan *Info, 16)}
	l, err := New(Config{
		Inner: pl, TLS: &tls.Config{Certificates: []tls.Certificate{cert}},
		HandshakeTimeout: hs, ConnectTimeout: connect,
		OnFailure: func(fl Failure) { f.failures <- fl },
	})
	require.NoError(t, err)
	f.ln = l
	f.srv, err = ingest.New(ingest.Config{Handler: &hook{infos: f.infos}})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Serve(func(id string, c net.Conn) error { return f.srv.ServeConn(c, id, true) })
	}()
	f.close = sync.OnceFunc(func() {
		l.Close(func(string) { f.srv.Close() })
		f.srv.Close()
		<-done
	})
	t.Cleanup(f.close)
	return f
}

// held returns how many connections the listener has in its hands (in the
// handshake, or waiting for CONNECT).
func (f *fixture) held() int {
	f.ln.mu.Lock()
	defer f.ln.mu.Unlock()
	return len(f.ln.conns)
}

// dial connects from src with a PROXY v2 header claiming client.
func (f *fixture) dial(t *testing.T, client string) net.Conn {
	t.Helper()
	c, err := proxyproto.DialContext(t.Context(), nil, "tcp", f.addr, proxyproto.Header{
		Version: 2, Command: proxyproto.CommandProxy,
		Source: netip.MustParseAddrPort(client), Destination: netip.MustParseAddrPort("192.0.2.10:8883"),
	})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func (f *fixture) failure(t *testing.T) Failure {
	t.Helper()
	select {
	case fl := <-f.failures:
		return fl
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no failure reported")
	}
	return Failure{}
}

// connectPacket is a minimal MQTT 3.1.1 CONNECT for client id "dev".
var connectPacket = []byte{0x10, 15, 0, 4, 'M', 'Q', 'T', 'T', 4, 2, 0, 30, 0, 3, 'd', 'e', 'v'}

func TestConnectedConnectionCarriesEveryLayer(t *testing.T) {
	f := start(t, time.Second, time.Second)
	c := f.dial(t, "203.0.113.7:5555")
	tc := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "gateway.test"})
	_, err := tc.Write(connectPacket)
	require.NoError(t, err)
	ack := make([]byte, 4)
	_, err = io.ReadFull(tc, ack)
	require.NoError(t, err, "CONNACK")
	require.Equal(t, byte(0x20), ack[0], "CONNACK %x", ack)
	require.Zero(t, ack[3], "CONNACK %x", ack)
	info := <-f.infos
	assert.Equal(t, "gateway.test", info.ServerName, "SNI")
	assert.Equal(t, netip.MustParseAddrPort("203.0.113.7:5555"), info.Facts.Source, "facts %v", info.Facts)
	assert.Equal(t, netip.MustParseAddr("127.0.0.1"), info.Facts.Peer.Addr(), "facts %v", info.Facts)
	assert.Equal(t, uint16(tls.VersionTLS13), info.State.Version, "TLS version")
	select {
	case fl := <-f.failures:
		assert.Fail(t, "unexpected failure", "%v", fl.LogValue())
	default:
	}
}

func TestSilentAfterProxyHeaderClosedAtHandshakeDeadline(t *testing.T) {
	f := start(t, 300*time.Millisecond, time.Second)
	c := f.dial(t, "203.0.113.7:5555")
	fl := f.failure(t)
	assert.Equal(t, StageTLS, fl.Stage, "failure %v", fl.LogValue())
	assert.True(t, fl.Timeout, "failure %v: want the handshake deadline to have closed it", fl.LogValue())
	assert.GreaterOrEqual(t, fl.Duration, 300*time.Millisecond, "closed before the deadline")
	assert.Equal(t, netip.MustParseAddr("203.0.113.7"), fl.Info.Facts.Source.Addr(), "failure %v", fl.LogValue())
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "client read: closed by the gateway")
}

func TestHandshakeFailureKeepsServerName(t *testing.T) {
	f := start(t, time.Second, time.Second)
	c := f.dial(t, "203.0.113.8:5555")
	other, _ := pki.NewCA("other")
	tc := tls.Client(c, &tls.Config{RootCAs: other.Pool(), ServerName: "gateway.test"})
	require.Error(t, tc.Handshake(), "handshake with the wrong CA succeeded")
	fl := f.failure(t)
	assert.Equal(t, StageTLS, fl.Stage, "failure %v", fl.LogValue())
	assert.False(t, fl.Timeout, "failure %v", fl.LogValue())
	assert.Equal(t, "gateway.test", fl.Info.ServerName, "failure %v", fl.LogValue())
}

func TestNoConnectClosedAtDeadline(t *testing.T) {
	f := start(t, time.Second, 300*time.Millisecond)
	c := f.dial(t, "203.0.113.9:5555")
	tc := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "gateway.test"})
	require.NoError(t, tc.Handshake())
	fl := f.failure(t)
	assert.Equal(t, StageConnect, fl.Stage, "failure %v", fl.LogValue())
	assert.True(t, fl.Timeout, "failure %v: want the CONNECT deadline to have closed it", fl.LogValue())
	assert.Equal(t, "gateway.test", fl.Info.ServerName, "failure %v", fl.LogValue())
	assert.GreaterOrEqual(t, fl.Duration, 300*time.Millisecond, "closed before the deadline")
}

func TestCloseWithHalfOpenConnections(t *testing.T) {
	f := start(t, 10*time.Second, 10*time.Second)
	f.dial(t, "203.0.113.10:5555") // in the handshake
	c := f.dial(t, "203.0.113.11:5555")
	tc := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "gateway.test"})
	require.NoError(t, tc.Handshake()) // waiting for CONNECT
	require.Eventually(t, func() bool { return f.held() == 2 }, 5*time.Second, time.Millisecond,
		"both connections in the listener's hands")
	done := make(chan struct{})
	go func() { f.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		require.FailNow(t, "Server.Close blocked on half-open connections")
	}
}
