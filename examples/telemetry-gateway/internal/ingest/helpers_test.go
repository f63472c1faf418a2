package ingest_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/packets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
)

// wait bounds every wait for the server in these tests.
const wait = 5 * time.Second

// tick is how often require.Eventually looks again.
const tick = time.Millisecond

// published is one PUBLISH as the handler saw it.
type published struct {
	client  *ingest.Client
	topic   string
	payload string
	qos     byte
	id      uint16
}

// ended is one Disconnected call.
type ended struct {
	client *ingest.Client
	err    error
}

// recorder is a Handler that records what the server asks and acknowledges
// QoS 1 at once.
type recorder struct {
	connectCode   byte // what Connect answers
	connectReason string

	publishes    chan published
	established  chan *ingest.Client
	disconnected chan ended

	mu   sync.Mutex
	ends map[*ingest.Client]int
}

func newRecorder() *recorder {
	return &recorder{
		publishes:    make(chan published, 4096),
		established:  make(chan *ingest.Client, 64),
		disconnected: make(chan ended, 64),
		ends:         make(map[*ingest.Client]int),
	}
}

func (r *recorder) Connect(*ingest.Client, *mqttwire.Connect) (byte, string) {
	return r.connectCode, r.connectReason
}

func (r *recorder) Established(c *ingest.Client) { r.established <- c }

func (r *recorder) Publish(c *ingest.Client, pk *mqttwire.Publish) (byte, string, bool) {
	r.publishes <- published{client: c, topic: string(pk.Topic), payload: string(pk.Payload), qos: pk.QoS, id: pk.PacketID}
	if pk.QoS == 1 {
		var b [8]byte
		_ = c.Write(c.AppendAck(b[:0], mqttwire.PUBACK, pk.PacketID, 0, ""))
	}
	return 0, "", true
}

func (r *recorder) Disconnected(c *ingest.Client, err error) {
	r.mu.Lock()
	r.ends[c]++
	r.mu.Unlock()
	r.disconnected <- ended{client: c, err: err}
}

// endCount is how many times Disconnected was called for c.
func (r *recorder) endCount(c *ingest.Client) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ends[c]
}

func (r *recorder) nextPublish(t *testing.T) published {
	t.Helper()
	select {
	case p := <-r.publishes:
		return p
	case <-time.After(wait):
		require.FailNow(t, "no PUBLISH reached the handler")
	}
	return published{}
}

func (r *recorder) nextEstablished(t *testing.T) *ingest.Client {
	t.Helper()
	select {
	case c := <-r.established:
		return c
	case <-time.After(wait):
		require.FailNow(t, "no connection was established")
	}
	return nil
}

func (r *recorder) nextDisconnected(t *testing.T) ended {
	t.Helper()
	select {
	case e := <-r.disconnected:
		return e
	case <-time.After(wait):
		require.FailNow(t, "Disconnected was not called")
	}
	return ended{}
}

// expectEnded requires the next Disconnected to be c's (any client's when c
// is nil), the server having ended it with code.
func (r *recorder) expectEnded(t *testing.T, c *ingest.Client, code byte) {
	t.Helper()
	e := r.nextDisconnected(t)
	if c != nil {
		assert.Same(t, c, e.client)
	}
	var de *ingest.DisconnectError
	require.ErrorAs(t, e.err, &de)
	assert.Equal(t, code, de.Code)
}

// noPublish checks that no PUBLISH reached the handler so far.
func (r *recorder) noPublish(t *testing.T) {
	t.Helper()
	select {
	case p := <-r.publishes:
		require.FailNow(t, "unexpected PUBLISH", "%+v", p)
	default:
	}
}

// harness is a Server behind a real loopback listener (TCP, or TLS over it).
type harness struct {
	srv       *ingest.Server
	h         *recorder // nil when the handler is another
	ln        net.Listener
	addr      string
	clientTLS *tls.Config // nil: plain TCP

	serving  sync.WaitGroup // ServeConn calls
	returned atomic.Int64   // ServeConn calls returned
	accepted atomic.Int64
	closed   sync.Once
}

type option func(*ingest.Config, *harnessOpts)

type harnessOpts struct {
	tls      bool
	parkable func(n int64) bool // whether the nth accepted connection (from 1) may park
}

func withTLS() option { return func(_ *ingest.Config, o *harnessOpts) { o.tls = true } }

// withParkable says which connections, by accept order from 1, ServeConn
// may park; the others keep their goroutine.
func withParkable(f func(n int64) bool) option {
	return func(_ *ingest.Config, o *harnessOpts) { o.parkable = f }
}

func withConfig(f func(*ingest.Config)) option {
	return func(c *ingest.Config, _ *harnessOpts) { f(c) }
}

// serve starts a Server with h and opts on 127.0.0.1:0. Every accepted
// connection is handed to ServeConn as a *net.TCPConn or *tls.Conn, so that
// it may park.
func serve(t testing.TB, h ingest.Handler, opts ...option) *harness {
	t.Helper()
	cfg := ingest.Config{Handler: h, TopicAliasMaximum: 4, IdleAfter: time.Minute}
	var o harnessOpts
	for _, f := range opts {
		f(&cfg, &o)
	}
	srv, err := ingest.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &harness{srv: srv, ln: ln, addr: ln.Addr().String()}
	switch h := h.(type) {
	case *recorder:
		hs.h = h
	case *holder:
		hs.h = h.recorder
	case ender:
		hs.h = h.recorder
	}
	var serverTLS *tls.Config
	if o.tls {
		ca, err := pki.NewCA("ingest test CA")
		require.NoError(t, err)
		cert, err := ca.Server("127.0.0.1")
		require.NoError(t, err)
		serverTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		hs.clientTLS = &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	}
	hs.serving.Add(1)
	go func() {
		defer hs.serving.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n := hs.accepted.Add(1)
			parkable := o.parkable == nil || o.parkable(n)
			hs.serving.Add(1)
			go func() {
				defer hs.serving.Done()
				defer hs.returned.Add(1)
				_ = conn.SetDeadline(time.Now().Add(wait)) // for the handshake and CONNECT
				if serverTLS != nil {
					_ = hs.srv.ServeConn(tls.Server(conn, serverTLS), "test", parkable)
					return
				}
				_ = hs.srv.ServeConn(conn, "test", parkable)
			}()
		}
	}()
	t.Cleanup(hs.close)
	return hs
}

// close closes the listener and the server and waits for every ServeConn.
func (hs *harness) close() {
	hs.closed.Do(func() {
		hs.ln.Close()
		hs.srv.Close()
		hs.serving.Wait()
	})
}

// dialRaw connects a raw client (TLS when the harness serves TLS).
func (hs *harness) dialRaw(t testing.TB) *rawConn {
	t.Helper()
	tcp, err := net.Dial("tcp", hs.addr)
	require.NoError(t, err)
	rc := &rawConn{t: t, tcp: tcp.(*net.TCPConn), conn: tcp}
	if hs.clientTLS != nil {
		rc.split = &splitConn{Conn: tcp}
		tc := tls.Client(rc.split, hs.clientTLS)
		require.NoError(t, tc.Handshake())
		rc.conn = tc
	}
	rc.r = bufio.NewReader(rc.conn)
	t.Cleanup(func() { rc.conn.Close() })
	return rc
}

// splitConn holds back what TLS writes while hold is set, so that a test can
// send a record in pieces.
type splitConn struct {
	net.Conn
	hold *bytes.Buffer
}

func (s *splitConn) Write(b []byte) (int, error) {
	if s.hold != nil {
		return s.hold.Write(b)
	}
	return s.Conn.Write(b)
}

// rawConn is a client that writes and reads MQTT packets byte by byte.
type rawConn struct {
	t     testing.TB
	tcp   *net.TCPConn
	conn  net.Conn // tcp, or TLS over it
	split *splitConn
	r     *bufio.Reader
}

func (rc *rawConn) send(pkts ...[]byte) {
	rc.t.Helper()
	_ = rc.conn.SetWriteDeadline(time.Now().Add(wait))
	for _, p := range pkts {
		_, err := rc.conn.Write(p)
		require.NoError(rc.t, err)
	}
}

// sealed returns the TLS records that carry p, without sending them.
func (rc *rawConn) sealed(p []byte) []byte {
	rc.t.Helper()
	require.NotNil(rc.t, rc.split, "sealed needs TLS")
	var b bytes.Buffer
	rc.split.hold = &b
	_, err := rc.conn.Write(p)
	rc.split.hold = nil
	require.NoError(rc.t, err)
	return b.Bytes()
}

// sendTCP writes b to the TCP socket under any TLS.
func (rc *rawConn) sendTCP(b []byte) {
	rc.t.Helper()
	_, err := rc.tcp.Write(b)
	require.NoError(rc.t, err)
}

// packet is one packet read whole.
type packet struct {
	typ, flags byte
	body       []byte
	raw        []byte
}

// read reads the next packet; it fails the test when none comes.
func (rc *rawConn) read() packet {
	rc.t.Helper()
	p, err := rc.tryRead()
	require.NoError(rc.t, err, "reading a packet from the server")
	return p
}

func (rc *rawConn) tryRead() (packet, error) {
	_ = rc.conn.SetReadDeadline(time.Now().Add(wait))
	first, err := rc.r.ReadByte()
	if err != nil {
		return packet{}, err
	}
	raw := []byte{first}
	n, mul := 0, 1
	for i := 0; ; i++ {
		b, err := rc.r.ReadByte()
		if err != nil {
			return packet{}, err
		}
		raw = append(raw, b)
		n += int(b&0x7f) * mul
		if b&0x80 == 0 {
			break
		}
		if i == 3 {
			return packet{}, errors.New("remaining length too long")
		}
		mul <<= 7
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(rc.r, body); err != nil {
		return packet{}, err
	}
	raw = append(raw, body...)
	return packet{typ: first >> 4, flags: first & 0xf, body: body, raw: raw}, nil
}

// expectClosed reads until the server closes the connection; every packet
// read on the way is returned.
func (rc *rawConn) expectClosed() []packet {
	rc.t.Helper()
	var got []packet
	for {
		p, err := rc.tryRead()
		if err == nil {
			got = append(got, p)
			continue
		}
		var ne net.Error
		require.False(rc.t, errors.As(err, &ne) && ne.Timeout(), "the server did not close the connection (got %d packets)", len(got))
		return got
	}
}

// expectDisconnect reads until the server closes, requiring an MQTT 5
// DISCONNECT with code as the last packet.
func (rc *rawConn) expectDisconnect(code byte) {
	rc.t.Helper()
	got := rc.expectClosed()
	require.NotEmpty(rc.t, got, "no DISCONNECT before the close")
	last := got[len(got)-1]
	require.Equal(rc.t, mqttwire.DISCONNECT, last.typ, "last packet")
	require.NotEmpty(rc.t, last.body)
	require.Equal(rc.t, code, last.body[0], "DISCONNECT reason code 0x%02x, want 0x%02x", last.body[0], code)
}

// connack5 decodes an MQTT 5 CONNACK with paho.golang.
func connack5(t testing.TB, p packet) *paho5.Connack {
	t.Helper()
	require.Equal(t, mqttwire.CONNACK, p.typ)
	cp, err := paho5.ReadPacket(bytes.NewReader(p.raw))
	require.NoError(t, err)
	ack, ok := cp.Content.(*paho5.Connack)
	require.True(t, ok)
	return ack
}

// connect4 is an MQTT 3.1.1 CONNECT (§3.1).
func connect4(id string, clean bool, keepAlive uint16) []byte {
	flags := byte(0)
	if clean {
		flags |= 0x02
	}
	var body []byte
	body = appendStr(body, "MQTT")
	body = append(body, 4, flags)
	body = binary.BigEndian.AppendUint16(body, keepAlive)
	body = appendStr(body, id)
	return frame(mqttwire.CONNECT<<4, body)
}

// connect5 is an MQTT 5 CONNECT written by paho.golang.
func connect5(t testing.TB, c *paho5.Connect) []byte {
	t.Helper()
	c.ProtocolName, c.ProtocolVersion = "MQTT", 5
	if c.Properties == nil {
		c.Properties = &paho5.Properties{}
	}
	return encode5(t, c)
}

func encode5(t testing.TB, p io.WriterTo) []byte {
	t.Helper()
	var b bytes.Buffer
	_, err := p.WriteTo(&b)
	require.NoError(t, err)
	return b.Bytes()
}

// publishPkt is a PUBLISH (MQTT 3.1.1 §3.3 / MQTT 5 §3.3); v5 adds the
// property list props (without its length).
func publishPkt(v5 bool, qos byte, id uint16, topic, payload string, props ...byte) []byte {
	return publishFlags(v5, qos<<1, id, topic, payload, props...)
}

func publishFlags(v5 bool, flags byte, id uint16, topic, payload string, props ...byte) []byte {
	body := appendStr(nil, topic)
	if flags&0x06 != 0 {
		body = binary.BigEndian.AppendUint16(body, id)
	}
	if v5 {
		body = appendVBI(body, len(props))
		body = append(body, props...)
	}
	body = append(body, payload...)
	return frame(mqttwire.PUBLISH<<4|flags, body)
}

// aliasProp is the Topic Alias property (MQTT 5 §3.3.2.3.4).
func aliasProp(a uint16) []byte { return []byte{0x23, byte(a >> 8), byte(a)} }

func pubrel(v5 bool, id uint16) []byte {
	return mqttwire.AppendAck(nil, mqttwire.PUBREL, id, 0, "", v5)
}

func frame(first byte, body []byte) []byte {
	return append(appendVBI([]byte{first}, len(body)), body...)
}

func appendStr(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint16(b, uint16(len(s))), s...)
}

func appendVBI(b []byte, n int) []byte {
	for {
		d := byte(n & 0x7f)
		n >>= 7
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

// connect sends a CONNECT and requires an accepting CONNACK; it returns the
// client as the handler saw it.
func (rc *rawConn) connect(h *recorder, pkt []byte) (*ingest.Client, packet) {
	rc.t.Helper()
	rc.send(pkt)
	ack := rc.read()
	require.Equal(rc.t, mqttwire.CONNACK, ack.typ)
	require.GreaterOrEqual(rc.t, len(ack.body), 2)
	require.Equal(rc.t, byte(0), ack.body[1], "CONNACK code")
	var c *ingest.Client
	select {
	case c = <-h.established:
	case <-time.After(wait):
		require.FailNow(rc.t, "Established was not called")
	}
	return c, ack
}

// dialConnected dials and connects a raw client of version v (4 or 5) with
// client id id and keep alive 0.
func (hs *harness) dialConnected(t testing.TB, v byte, id string) (*rawConn, *ingest.Client) {
	t.Helper()
	rc := hs.dialRaw(t)
	var pkt []byte
	if v == 5 {
		pkt = connect5(t, &paho5.Connect{ClientID: id, CleanStart: true})
	} else {
		pkt = connect4(id, true, 0)
	}
	c, _ := rc.connect(hs.h, pkt)
	return rc, c
}

// waitParked waits until exactly n connections wait in the epoll set.
func (hs *harness) waitParked(t testing.TB, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return hs.srv.Stats().Parked.Load() == n }, wait, tick,
		"Parked = %d, want %d", hs.srv.Stats().Parked.Load(), n)
}
