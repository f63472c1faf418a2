package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/reading"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The benchmarks compare the whole chain with a bare mochi-mqtt broker, the
// MQTT server the gateway ran on before its own (internal/ingest).
//
// chain: the gateway as deployed: TCP, the PROXY listener (header parsed and
// trusted), clientip resolution, the TLS and CONNECT deadlines, the ingest
// server, the hook (rate limiter with a limit far above the load, JSON
// validation, device check, provenance record, metrics on an SDK meter
// provider) and the sink. The client sends a PROXY v2 header.
//
// bare: mochi-mqtt with its own TLS listener (listeners.NewTCP), the allow-all
// auth hook and, unless "nosink", a hook that does the sink's share of the
// work identically (validate, build the record, append). No PROXY header.
//
// The sink is "write" (write(2) per batch, no fsync) unless the name says
// "fsync". QoS 1 waits for the sink before PUBACK in both (chain: the
// connection reads on meanwhile; bare: its read loop waits); QoS 0 queues.
// Four connections, 32 readings in flight on each.

type benchTarget struct {
	addr  string
	proxy uint8
	ca    *pki.CA
	stop  func()
}

func benchCert(b *testing.B) (*pki.CA, *tls.Config) {
	ca, err := pki.NewCA("bench CA")
	if err != nil {
		b.Fatal(err)
	}
	cert, err := ca.Server("gateway.test")
	if err != nil {
		b.Fatal(err)
	}
	return ca, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

func startChain(b *testing.B, sync sink.SyncMode) benchTarget {
	ca, tlsCfg := benchCert(b)
	g, err := New(Config{
		MQTTAddr: "127.0.0.1:0", ProxyTrusted: clientip.MustParsePrefixSet(lbAddr.String()),
		TLS: tlsCfg, Sink: sink.Config{Path: filepath.Join(b.TempDir(), "s.jsonl"), Sync: sync},
		RateLimit: 1e9, RateBurst: 1e9, RateMaxWait: time.Second,
		Logger:        slog.New(slog.NewJSONHandler(io.Discard, nil)),
		MQTTLogLevel:  slog.LevelError + 100,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Start(); err != nil {
		b.Fatal(err)
	}
	return benchTarget{addr: g.MQTTAddr(), proxy: 2, ca: ca, stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx, 0); err != nil {
			f, _ := os.CreateTemp("", "gateway-shutdown-*.txt")
			pprof.Lookup("goroutine").WriteTo(f, 2)
			f.Close()
			b.Errorf("shutdown: %v (goroutines in %s)", err, f.Name())
		}
	}}
}

// allowHook allows every connection and publish, like mochi's auth.AllowHook
// (which would pull in a YAML library).
type allowHook struct{ mqtt.HookBase }

func (h *allowHook) ID() string { return "allow-all" }
func (h *allowHook) Provides(b byte) bool {
	return b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck
}
func (h *allowHook) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }
func (h *allowHook) OnACLCheck(*mqtt.Client, string, bool) bool              { return true }

// bareSinkHook does what the gateway's hook does with the sink, and nothing else.
type bareSinkHook struct {
	mqtt.HookBase
	s *sink.Sink
}

func (h *bareSinkHook) ID() string           { return "bare-sink" }
func (h *bareSinkHook) Provides(b byte) bool { return b == mqtt.OnPublish }
func (h *bareSinkHook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	r, err := reading.Parse(pk.Payload, 0)
	if err != nil {
		return pk, packets.ErrRejectPacket
	}
	rec := &sink.Record{ID: r.Key(), Device: r.Device, Seq: r.Seq, Received: time.Now().UTC(), Protocol: "mqtt",
		Topic: pk.TopicName, QoS: pk.FixedHeader.Qos, Payload: r.Compact,
		Provenance: sink.Provenance{Client: cl.Net.Remote, Source: "socket", Peer: cl.Net.Remote, ClientID: cl.ID}}
	if pk.FixedHeader.Qos == 0 {
		err = h.s.Enqueue(context.Background(), rec)
	} else {
		_, err = h.s.Append(context.Background(), rec)
	}
	if err != nil {
		return pk, packets.ErrRejectPacket
	}
	return pk, nil
}

func startBare(b *testing.B, withSink bool, sync sink.SyncMode) benchTarget {
	ca, tlsCfg := benchCert(b)
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := srv.AddHook(new(allowHook), nil); err != nil {
		b.Fatal(err)
	}
	var s *sink.Sink
	if withSink {
		var err error
		if s, err = sink.Open(sink.Config{Path: filepath.Join(b.TempDir(), "s.jsonl"), Sync: sync}); err != nil {
			b.Fatal(err)
		}
		if err := srv.AddHook(&bareSinkHook{s: s}, nil); err != nil {
			b.Fatal(err)
		}
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "bare", Address: "127.0.0.1:0", TLSConfig: tlsCfg})
	if err := srv.AddListener(tcp); err != nil {
		b.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		b.Fatal(err)
	}
	return benchTarget{addr: tcp.Address(), ca: ca, stop: func() {
		done := make(chan struct{})
		go func() { srv.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			f, _ := os.CreateTemp("", "bare-shutdown-*.txt")
			pprof.Lookup("goroutine").WriteTo(f, 2)
			f.Close()
			b.Errorf("mochi's Server.Close did not return within 15s (goroutines in %s)", f.Name())
		}
		if s != nil {
			s.Close()
		}
	}}
}

func (bt benchTarget) device(id string) device.Config {
	return device.Config{ID: id, Version: 5, Addr: bt.addr, Local: lbAddr, Proxy: bt.proxy,
		Claim:   map[bool]netipAP{true: mustAP("127.0.0.90:9000")}[bt.proxy != 0],
		TLS:     &tls.Config{RootCAs: bt.ca.Pool(), ServerName: "gateway.test"},
		Timeout: 10 * time.Second}
}

func BenchmarkPublish(b *testing.B) {
	setups := []struct {
		name  string
		start func(*testing.B) benchTarget
	}{
		{"chain", func(b *testing.B) benchTarget { return startChain(b, sink.SyncWrite) }},
		{"bare", func(b *testing.B) benchTarget { return startBare(b, true, sink.SyncWrite) }},
		{"chain-fsync", func(b *testing.B) benchTarget { return startChain(b, sink.SyncFsync) }},
		{"bare-fsync", func(b *testing.B) benchTarget { return startBare(b, true, sink.SyncFsync) }},
		{"bare-nosink", func(b *testing.B) benchTarget { return startBare(b, false, 0) }},
	}
	for _, qos := range []byte{0, 1} {
		for _, s := range setups {
			b.Run(fmt.Sprintf("qos%d/%s", qos, s.name), func(b *testing.B) { benchPublish(b, s.start(b), qos) })
		}
	}
}

func benchPublish(b *testing.B, bt benchTarget, qos byte) {
	defer bt.stop()
	const conns, window = 4, 32
	ctx := context.Background()
	clients := make([]*device.Client, conns)
	for i := range clients {
		c, err := device.Connect(ctx, bt.device(fmt.Sprintf("bench%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	payloads := make([][][]byte, conns)
	per := (b.N + conns - 1) / conns
	for i := range payloads {
		for seq := range per + 1 {
			payloads[i] = append(payloads[i], device.Reading(fmt.Sprintf("bench%d", i), uint64(seq), 21.5))
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i, c := range clients {
		wg.Go(func() {
			id := fmt.Sprintf("bench%d", i)
			sem := make(chan struct{}, window)
			var inflight sync.WaitGroup
			for seq := range per {
				sem <- struct{}{}
				inflight.Go(func() {
					defer func() { <-sem }()
					if err := c.Publish(ctx, "telemetry/"+id, qos, payloads[i][seq]); err != nil {
						failed.Add(1)
					}
				})
			}
			inflight.Wait()
			// A QoS 1 reading behind the QoS 0 ones: its PUBACK means the
			// broker has handled everything before it on this connection.
			if err := c.Publish(ctx, "telemetry/"+id, 1, payloads[i][per]); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d publishes failed", n)
	}
	b.ReportMetric(float64(per*conns)/elapsed.Seconds(), "msgs/s")
}

func BenchmarkConnect(b *testing.B) {
	for _, s := range []struct {
		name  string
		start func(*testing.B) benchTarget
	}{
		{"chain", func(b *testing.B) benchTarget { return startChain(b, sink.SyncWrite) }},
		{"bare", func(b *testing.B) benchTarget { return startBare(b, false, 0) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			bt := s.start(b)
			defer bt.stop()
			var n atomic.Int64
			b.ReportAllocs()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					c, err := device.Connect(ctx, bt.device(fmt.Sprintf("c%d", n.Add(1))))
					cancel()
					if err != nil {
						b.Error(err)
						return
					}
					c.Close()
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "conns/s")
		})
	}
}
