package ingest_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/packets"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
)

// counter is a Handler that keeps only counts: it accepts every CONNECT,
// acknowledges QoS 1 at once and counts the Disconnected calls per client
// id. done, when set, is closed once target PUBLISHes have been handled.
type counter struct {
	published atomic.Int64
	target    int64
	done      chan struct{}

	mu   sync.Mutex
	ends map[string]int
}

func newCounter() *counter { return &counter{ends: make(map[string]int)} }

func (h *counter) Connect(*ingest.Client, *mqttwire.Connect) (byte, string) { return 0, "" }
func (h *counter) Established(*ingest.Client)                               {}

func (h *counter) Publish(c *ingest.Client, pk *mqttwire.Publish) (byte, string, bool) {
	if pk.QoS == 1 {
		var b [8]byte
		_ = c.Write(c.AppendAck(b[:0], mqttwire.PUBACK, pk.PacketID, 0, ""))
	}
	if h.published.Add(1) == h.target && h.done != nil {
		close(h.done)
	}
	return 0, "", true
}

func (h *counter) Disconnected(c *ingest.Client, _ error) {
	h.mu.Lock()
	h.ends[c.ID]++
	h.mu.Unlock()
}

func (h *counter) endsOf(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ends[id]
}

// connectRaw dials hs and connects as id with MQTT version v; it returns
// once the CONNACK accepted it.
func connectRaw(t testing.TB, hs *harness, v byte, id string) *rawConn {
	t.Helper()
	rc := hs.dialRaw(t)
	pkt := connect4(id, true, 0)
	if v == 5 {
		pkt = connect5(t, &paho5.Connect{ClientID: id, CleanStart: true})
	}
	rc.send(pkt)
	ack := rc.read()
	require.Equal(t, mqttwire.CONNACK, ack.typ)
	require.Equal(t, byte(0), ack.body[1])
	return rc
}

// FuzzServe feeds arbitrary bytes to an established connection (MQTT 3.1.1
// for an even v, 5 for an odd one) over real loopback TCP, then half-closes
// it: no input may panic the server, whatever it answers the connection
// must end (with the client's EOF at the latest), and Disconnected must be
// called for it exactly once. IdleAfter is short, so that the input's pauses
// between reads go through the epoll set too.
func FuzzServe(f *testing.F) {
	for _, v5 := range []bool{false, true} {
		v := byte(4)
		if v5 {
			v = 5
		}
		f.Add(v, publishPkt(v5, 1, 1, "t", "x"))
		f.Add(v, append(publishPkt(v5, 2, 2, "t", "x"), pubrel(v5, 2)...))
		f.Add(v, []byte{mqttwire.PINGREQ << 4, 0, mqttwire.DISCONNECT << 4, 0})
		f.Add(v, publishPkt(v5, 0, 0, "t", "x")[:4])
		f.Add(v, []byte{mqttwire.PUBLISH << 4, 0xff, 0xff, 0xff, 0x7f})
		f.Add(v, []byte{mqttwire.SUBSCRIBE<<4 | 2, 6, 0, 1, 0, 1, 'a', 0})
		f.Add(v, connect4("again", true, 0))
	}
	f.Add(byte(5), publishPkt(true, 0, 0, "", "x", aliasProp(1)...))
	f.Add(byte(5), publishPkt(true, 0, 0, "t", "x", 0x23, 0))
	h := newCounter()
	hs := serve(f, h, withConfig(func(c *ingest.Config) { c.IdleAfter = 20 * time.Millisecond; c.MaxPacketSize = 8192 }))
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, v byte, data []byte) {
		id := fmt.Sprint("fuzz-", n.Add(1))
		rc := connectRaw(t, hs, 4+v%2, id)
		_ = rc.conn.SetWriteDeadline(time.Now().Add(wait))
		_, _ = rc.conn.Write(data) // the server may have closed already
		_ = rc.tcp.CloseWrite()
		_ = rc.conn.SetReadDeadline(time.Now().Add(wait))
		_, err := io.Copy(io.Discard, rc.r)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection neither ended nor was ended")
		require.Eventually(t, func() bool { return h.endsOf(id) == 1 }, wait, tick, "Disconnected %d times", h.endsOf(id))
	})
}
