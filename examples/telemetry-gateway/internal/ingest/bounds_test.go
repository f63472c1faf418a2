package ingest_test

import (
	"bufio"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/packets"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/ingest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/mqttwire"
)

// The topics a connection keeps for its aliases are bounded: topic aliases
// of up to a packet each would let one connection hold a megabyte. Setting
// more than 4 KiB of them ends the connection with "quota exceeded"; setting
// an alias again with a shorter topic frees the difference.
func TestTopicAliasBytesBounded(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h, withConfig(func(c *ingest.Config) { c.TopicAliasMaximum = 16 }))
	rc, _ := hs.dialConnected(t, 5, "aliasbytes")
	long := strings.Repeat("a", 3000)
	rc.send(publishPkt(true, 0, 0, long, "v", aliasProp(1)...))
	h.nextPublish(t)
	rc.send(publishPkt(true, 0, 0, "short", "v", aliasProp(1)...)) // 3000 bytes freed
	h.nextPublish(t)
	rc.send(publishPkt(true, 0, 0, long, "v", aliasProp(2)...))
	h.nextPublish(t)
	rc.send(publishPkt(true, 0, 0, strings.Repeat("b", 2000), "v", aliasProp(3)...))
	rc.expectDisconnect(mqttwire.QuotaExceeded)
	h.noPublish(t)
}

// [MQTT-3.1.2-24] (3.1.1) and [MQTT-3.1.2-22] (5) speak of control
// packets: the bytes of a packet that never completes do not keep a
// connection alive, so a client cannot hold it and its buffer by trickling.
func TestTricklingDoesNotKeepAlive(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc := hs.dialRaw(t)
	rc.connect(h, connect4("trickle", true, 1))
	pkt := publishPkt(false, 0, 0, "t", strings.Repeat("x", 100))
	const trickle = 10 * time.Second // far beyond one and a half times the keep alive
	start := time.Now()
	// A write fails only once the server has closed the connection, not at
	// the deadline the CONNECT was sent with.
	_ = rc.tcp.SetWriteDeadline(start.Add(2 * trickle))
	closed := false
	for i := 0; i < len(pkt)-1 && time.Since(start) < trickle; i++ {
		if _, err := rc.tcp.Write(pkt[i : i+1]); err != nil {
			closed = true
			break
		}
		time.Sleep(100 * time.Millisecond) // pacing the trickle, not synchronising
	}
	assert.True(t, closed, "the server closed the connection while the trickle went on: its bytes did not keep it alive")
	h.expectEnded(t, nil, mqttwire.KeepAliveTimeout)
	h.noPublish(t)
}

// MQTT 3.1 (protocol level 3, "MQIsdp") is not served: CONNACK return code
// 1, unacceptable protocol version (MQTT 3.1.1 §3.1.2.2), and the close.
func TestConnectMQTT31Refused(t *testing.T) {
	h := newRecorder()
	hs := serve(t, h)
	rc := hs.dialRaw(t)
	body := []byte{0, 6, 'M', 'Q', 'I', 's', 'd', 'p', 3, 2, 0, 30, 0, 3, 'd', 'e', 'v'}
	rc.send(append([]byte{mqttwire.CONNECT << 4, byte(len(body))}, body...))
	got := rc.expectClosed()
	require.Len(t, got, 1)
	assert.Equal(t, mqttwire.CONNACK, got[0].typ)
	assert.Equal(t, []byte{0, mqttwire.ConnRefusedProtocolVersion}, got[0].body)
}

// A client that never reads holds a write of the server at most
// WriteTimeout, from the first packet after the CONNACK on: the write then
// fails and the connection ends (so does Server.Close, which would
// otherwise wait for it). The server's end is one half of a net.Pipe, which
// buffers nothing: the PINGRESP write blocks at once, within the quarter of
// WriteTimeout in which the deadline set for the CONNACK is not moved.
func TestClientThatNeverReadsAfterConnack(t *testing.T) {
	versions(t, func(t *testing.T, v byte, v5 bool) {
		h := newRecorder()
		srv, err := ingest.New(ingest.Config{Handler: h, WriteTimeout: time.Second, IdleAfter: time.Minute})
		require.NoError(t, err)
		cli, conn := net.Pipe()
		t.Cleanup(func() {
			cli.Close() // first: with no write deadline, only this ends the server's write
			srv.Close()
		})
		go func() { _ = srv.ServeConn(conn, "pipe", false) }()
		rc := &rawConn{t: t, conn: cli, r: bufio.NewReader(cli)}
		pkt := connect4("deaf", true, 0)
		if v5 {
			pkt = connect5(t, &paho5.Connect{ClientID: "deaf", CleanStart: true})
		}
		c, _ := rc.connect(h, pkt)
		rc.send([]byte{mqttwire.PINGREQ << 4, 0}) // its PINGRESP is never read
		e := h.nextDisconnected(t)
		assert.Same(t, c, e.client)
		require.ErrorIs(t, e.err, os.ErrDeadlineExceeded)
	})
}
