package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// clientsGauge returns the gateway.mqtt.clients value the reader holds.
func clientsGauge(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "gateway.mqtt.clients" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				n += dp.Value
			}
		}
	}
	return n
}

func sessionCount(e *env) int {
	n := 0
	e.g.hook.sessions.Range(func(any, any) bool { n++; return true })
	return n
}

// TestSessionNotLeakedWhenConnackFails: an MQTT 5 CONNECT asking for a
// Maximum Packet Size smaller than the CONNACK passes OnConnect, after which
// mochi v2.7.9 fails to write the CONNACK and drops the connection without
// calling OnDisconnect. No session may be left behind for it, and the
// clients gauge must come back to zero; an ordinary client still gets its
// session while connected and loses it when it leaves.
func TestSessionNotLeakedWhenConnackFails(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	e := start(t, func(c *Config) {
		c.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	})
	const n = 50
	for i := range n {
		c, err := tls.Dial("tcp", e.g.MQTTAddr(), &tls.Config{RootCAs: e.ca.Pool(), ServerName: "gateway.test"})
		if err != nil {
			t.Fatal(err)
		}
		pk := packets.Packet{
			FixedHeader:     packets.FixedHeader{Type: packets.Connect},
			ProtocolVersion: 5,
			Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30,
				ClientIdentifier: fmt.Sprintf("leak-%d", i)},
			Properties: packets.Properties{MaximumPacketSize: 4},
		}
		var buf bytes.Buffer
		if err := pk.ConnectEncode(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		got, _ := io.ReadAll(c) // the server closes without a CONNACK
		c.Close()
		if len(got) != 0 {
			t.Fatalf("connection %d: got %d bytes, want the connection closed without a CONNACK", i, len(got))
		}
	}
	// Each connection was accepted by the policy (so OnConnect ran).
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "mqtt connection", "client_id": fmt.Sprint("leak-", n-1), "outcome": "accepted"})
	// The server's goroutine may still be unwinding the last one.
	deadline := time.Now().Add(3 * time.Second)
	for sessionCount(e) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := sessionCount(e); left != 0 {
		t.Errorf("%d sessions held after %d connections that never got a CONNACK", left, n)
	}
	if g := clientsGauge(t, reader); g != 0 {
		t.Errorf("clients gauge %d after %d connections that never got a CONNACK, want 0", g, n)
	}

	c, err := device.Connect(t.Context(), e.device("ok1", 5, 2, "127.0.0.46:4600"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(t.Context(), "telemetry/ok1", 1, device.Reading("ok1", 1, 1)); err != nil {
		t.Fatal(err)
	}
	if s, g := sessionCount(e), clientsGauge(t, reader); s != 1 || g != 1 {
		t.Errorf("connected client: %d sessions, gauge %d; want 1 and 1", s, g)
	}
	c.Close()
	deadline = time.Now().Add(3 * time.Second)
	for sessionCount(e) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s, g := sessionCount(e), clientsGauge(t, reader); s != 0 || g != 0 {
		t.Errorf("after the client left: %d sessions, gauge %d; want 0 and 0", s, g)
	}
}
