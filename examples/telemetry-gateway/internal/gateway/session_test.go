package gateway

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// clientsGauge returns the gateway.mqtt.clients value the reader holds.
func clientsGauge(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	return counter(t, r, "gateway.mqtt.clients", nil)
}

func sessionCount(e *env) int {
	n := 0
	e.g.hook.sessions.Range(func(any, any) bool { n++; return true })
	return n
}

// TestSessionNotLeakedWhenConnackFails: an MQTT 5 CONNECT asking for a
// Maximum Packet Size smaller than the CONNACK passes the gateway's Connect
// (the policy accepts it), after which the MQTT server finds the CONNACK too
// large to send (MQTT 5 §3.1.2.11.4) and closes the connection without it,
// calling neither Established nor Disconnected. No session may be left
// behind for it (Connect only prepares one; Established records it), and the
// clients gauge must come back to zero; an ordinary client still gets its
// session while connected and loses it when it leaves. The CONNECT is
// paho.golang's.
func TestSessionNotLeakedWhenConnackFails(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	e := start(t, func(c *Config) {
		c.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	})
	const n = 50
	for i := range n {
		c, err := tls.Dial("tcp", e.g.MQTTAddr(), &tls.Config{RootCAs: e.ca.Pool(), ServerName: "gateway.test"})
		require.NoError(t, err)
		maxPacket := uint32(4)
		pk := &packets.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, CleanStart: true, KeepAlive: 30,
			ClientID: fmt.Sprintf("leak-%d", i), Properties: &packets.Properties{MaximumPacketSize: &maxPacket}}
		var buf bytes.Buffer
		_, err = pk.WriteTo(&buf)
		require.NoError(t, err)
		_, err = c.Write(buf.Bytes())
		require.NoError(t, err)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		got, _ := io.ReadAll(c) // the server closes without a CONNACK
		c.Close()
		require.Empty(t, got, "connection %d: want the connection closed without a CONNACK", i)
	}
	// Each connection was accepted by the policy (so OnConnect ran).
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": fmt.Sprint("leak-", n-1), "outcome": "accepted"})
	// The server's goroutine may still be unwinding the last one.
	assert.Eventually(t, func() bool { return sessionCount(e) == 0 }, 3*time.Second, 10*time.Millisecond,
		"sessions held after %d connections that never got a CONNACK", n)
	assert.Zero(t, clientsGauge(t, reader), "clients gauge after %d connections that never got a CONNACK", n)

	c, err := device.Connect(t.Context(), e.device("ok1", 5, 2, "127.0.0.46:4600"))
	require.NoError(t, err)
	require.NoError(t, c.Publish(t.Context(), "telemetry/ok1", 1, device.Reading("ok1", 1, 1)))
	assert.Equal(t, 1, sessionCount(e), "connected client's sessions")
	assert.EqualValues(t, 1, clientsGauge(t, reader), "connected client's gauge")
	c.Close()
	// Disconnected deletes the session, then lowers the gauge: wait for both.
	assert.Eventually(t, func() bool { return sessionCount(e) == 0 && clientsGauge(t, reader) == 0 }, 10*time.Second, 10*time.Millisecond,
		"session and clients gauge after the client left")
	assert.Zero(t, sessionCount(e), "sessions after the client left")
	assert.Zero(t, clientsGauge(t, reader), "gauge after the client left")
}

// TestIdleConnectionsAreCounted: a device that sends nothing for the MQTT
// server's idle time waits in its epoll set, without a goroutine, and
// gateway.mqtt.idle counts it; a reading gives it a goroutine again (and is
// acknowledged), and it idles again after.
func TestIdleConnectionsAreCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	e := start(t, func(c *Config) {
		c.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	})
	idle := func() int64 { return counter(t, reader, "gateway.mqtt.idle", nil) }
	c, err := device.Connect(t.Context(), e.device("idle1", 5, 2, "127.0.0.47:4700"))
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool { return idle() == 1 }, 10*time.Second, 50*time.Millisecond, "the idle device in the epoll set")
	require.NoError(t, c.Publish(t.Context(), "telemetry/idle1", 1, device.Reading("idle1", 1, 1)), "a reading from an idle device")
	require.Eventually(t, func() bool { return idle() == 1 }, 10*time.Second, 50*time.Millisecond, "idle again")
	assert.Equal(t, 1, e.summary(t).Unique)
}

// TestSessionEstablishedDuringShutdownIsReleased: shutdown releases every
// ack queue, so that an MQTT 3.1.1 read loop waiting for room in its full
// queue goes on and notices its connection closing, and the server's Close
// does not wait for it until the shutdown's deadline. A session established
// after shutdown went over the sessions (between that and the server's
// Close) must be released too: here shutdown has begun as the device
// connects.
func TestSessionEstablishedDuringShutdownIsReleased(t *testing.T) {
	e := start(t, nil)
	e.g.hook.stopping.Store(true) // as stopAll does before it releases the queues it finds
	c, err := device.Connect(t.Context(), e.device("late", 4, 2, "127.0.0.47:4700"))
	require.NoError(t, err)
	defer c.Close()
	// The CONNACK goes out before Established stores the session.
	var s *session
	require.Eventually(t, func() bool {
		e.g.hook.sessions.Range(func(_, v any) bool { s = v.(*session); return false })
		return s != nil
	}, 3*time.Second, time.Millisecond, "the device's session")
	s.acks.mu.Lock()
	defer s.acks.mu.Unlock()
	assert.True(t, s.acks.closing, "the ack queue of a session established during shutdown is released")
}
