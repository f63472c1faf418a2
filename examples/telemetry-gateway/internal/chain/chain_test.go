package chain

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/proxyproto"
)

type hook struct {
	mqtt.HookBase
	infos chan *Info
}

func (h *hook) ID() string { return "test" }
func (h *hook) Provides(b byte) bool {
	return bytes.Contains([]byte{mqtt.OnConnect, mqtt.OnConnectAuthenticate}, []byte{b})
}
func (h *hook) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	info, ok := InfoFromConn(cl.Net.Conn)
	if !ok {
		return errors.New("no info")
	}
	info.MarkConnected()
	h.infos <- info
	return nil
}
func (h *hook) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }

type fixture struct {
	srv      *mqtt.Server
	close    func()
	addr     string
	ca       *pki.CA
	failures chan Failure
	infos    chan *Info
}

func start(t *testing.T, hs, connect time.Duration) *fixture {
	t.Helper()
	ca, err := pki.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Server("gateway.test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := proxyproto.NewListener(tcp, proxyproto.Config{Trust: clientip.MustNew(clientip.Config{TrustedProxies: clientip.Loopback()})})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{addr: tcp.Addr().String(), ca: ca, failures: make(chan Failure, 16), infos: make(chan *Info, 16)}
	l, err := New(Config{
		Inner: pl, TLS: &tls.Config{Certificates: []tls.Certificate{cert}},
		HandshakeTimeout: hs, ConnectTimeout: connect,
		OnFailure: func(fl Failure) { f.failures <- fl },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = mqtt.New(&mqtt.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := f.srv.AddHook(&hook{infos: f.infos}, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Serve(); err != nil {
		t.Fatal(err)
	}
	f.close = sync.OnceFunc(func() { f.srv.Close() }) // mochi's Close panics when called twice
	t.Cleanup(f.close)
	return f
}

// dial connects from src with a PROXY v2 header claiming client.
func (f *fixture) dial(t *testing.T, client string) net.Conn {
	t.Helper()
	c, err := proxyproto.DialContext(t.Context(), nil, "tcp", f.addr, proxyproto.Header{
		Version: 2, Command: proxyproto.CommandProxy,
		Source: netip.MustParseAddrPort(client), Destination: netip.MustParseAddrPort("192.0.2.10:8883"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (f *fixture) failure(t *testing.T) Failure {
	t.Helper()
	select {
	case fl := <-f.failures:
		return fl
	case <-time.After(5 * time.Second):
		t.Fatal("no failure reported")
	}
	return Failure{}
}

// connectPacket is a minimal MQTT 3.1.1 CONNECT for client id "dev".
var connectPacket = []byte{0x10, 15, 0, 4, 'M', 'Q', 'T', 'T', 4, 2, 0, 30, 0, 3, 'd', 'e', 'v'}

func TestConnectedConnectionCarriesEveryLayer(t *testing.T) {
	f := start(t, time.Second, time.Second)
	c := f.dial(t, "203.0.113.7:5555")
	tc := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "gateway.test"})
	if _, err := tc.Write(connectPacket); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(tc, ack); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		t.Fatalf("CONNACK %x, %v", ack, err)
	}
	info := <-f.infos
	if info.ServerName != "gateway.test" || info.Facts.Source != netip.MustParseAddrPort("203.0.113.7:5555") ||
		info.Facts.Peer.Addr() != netip.MustParseAddr("127.0.0.1") || info.State.Version != tls.VersionTLS13 {
		t.Errorf("info: sni %q facts %v tls %x", info.ServerName, info.Facts, info.State.Version)
	}
	select {
	case fl := <-f.failures:
		t.Errorf("unexpected failure %v", fl.LogValue())
	default:
	}
}

func TestSilentAfterProxyHeaderClosedAtHandshakeDeadline(t *testing.T) {
	f := start(t, 300*time.Millisecond, time.Second)
	c := f.dial(t, "203.0.113.7:5555")
	start := time.Now()
	fl := f.failure(t)
	if fl.Stage != StageTLS || !fl.Timeout || fl.Info.Facts.Source.Addr() != netip.MustParseAddr("203.0.113.7") {
		t.Errorf("failure %v", fl.LogValue())
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closed after %v", d)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("client read %v, want EOF (closed by the gateway)", err)
	}
}

func TestHandshakeFailureKeepsServerName(t *testing.T) {
	f := start(t, time.Second, time.Second)
	c := f.dial(t, "203.0.113.8:5555")
	other, _ := pki.NewCA("other")
	tc := tls.Client(c, &tls.Config{RootCAs: other.Pool(), ServerName: "gateway.test"})
	if err := tc.Handshake(); err == nil {
		t.Fatal("handshake with the wrong CA succeeded")
	}
	fl := f.failure(t)
	if fl.Stage != StageTLS || fl.Timeout || fl.Info.ServerName != "gateway.test" {
		t.Errorf("failure %v", fl.LogValue())
	}
}

func TestNoConnectClosedAtDeadline(t *testing.T) {
	f := start(t, time.Second, 300*time.Millisecond)
	c := f.dial(t, "203.0.113.9:5555")
	tc := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "gateway.test"})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	fl := f.failure(t)
	if fl.Stage != StageConnect || !fl.Timeout || fl.Info.ServerName != "gateway.test" {
		t.Errorf("failure %v", fl.LogValue())
	}
	if fl.Duration < 300*time.Millisecond || fl.Duration > 2*time.Second {
		t.Errorf("closed after %v, want about 300ms", fl.Duration)
	}
}

func TestCloseWithHalfOpenConnections(t *testing.T) {
	f := start(t, 10*time.Second, 10*time.Second)
	f.dial(t, "203.0.113.10:5555") // in the handshake
	c := f.dial(t, "203.0.113.11:5555")
	tc := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "gateway.test"})
	if err := tc.Handshake(); err != nil { // waiting for CONNECT
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the first connection's handshake start
	done := make(chan struct{})
	go func() { f.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Server.Close blocked on half-open connections")
	}
}
