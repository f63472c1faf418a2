package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/jetstream"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/natstest"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/internal/haproxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	replicaDevices  = flag.Int("replicas.devices", 50, "TestReplicasOnJetStream: devices")
	replicaReadings = flag.Int("replicas.readings", 200, "TestReplicasOnJetStream: QoS 1 readings per device")
)

// execEnv, when set in a process's environment, makes the test binary run
// the command with its arguments instead of the tests: the replicas test
// runs each gateway as a process of its own, which it can kill.
const execEnv = "TELEMETRY_GATEWAY_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// replica is one gateway process.
type replica struct {
	cmd    *exec.Cmd
	addr   string // MQTT
	admin  string
	exited chan struct{}
	out    *e2e.Output
}

func startReplica(t *testing.T, args ...string) *replica {
	t.Helper()
	ports := e2e.FreePorts(t, 2)
	r := &replica{addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), admin: fmt.Sprintf("127.0.0.1:%d", ports[1]), exited: make(chan struct{}), out: &e2e.Output{}}
	r.cmd = exec.Command(os.Args[0], append([]string{"-mqtt-addr", r.addr, "-http-addr", "", "-admin-addr", r.admin,
		"-log-level", "warn", "-mqtt-log-level", "off", "-shutdown-timeout", "10s"}, args...)...)
	r.cmd.Env = append(os.Environ(), execEnv+"=1")
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, r.cmd.Start())
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(15 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
		if t.Failed() {
			t.Logf("gateway %s:\n%s", r.addr, r.out)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + r.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		select {
		case <-r.exited:
			require.FailNow(t, "gateway exited", "%s", r.out)
		case <-time.After(50 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "gateway %s not ready after 30s:\n%s", r.addr, r.out)
	}
}

// TestReplicasOnJetStream is the proof for replicas behind one load
// balancer: three gateway processes behind a real HAProxy (send-proxy-v2,
// round robin, connecting from 127.0.0.200) store into an R3 stream on a
// three-node NATS cluster. 50 devices (half MQTT 3.1.1, half 5) send 200 QoS 1
// readings each, 16 in flight, and send again whatever was not acknowledged
// after a reconnect, which the load balancer may route to another replica.
// Meanwhile HAProxy restarts (every connection cut), one gateway is killed
// with SIGKILL, and the NATS node leading the stream is killed with SIGKILL.
// Every acknowledged reading must be in the stream exactly once, with the
// provenance of the device that sent it.
func TestReplicasOnJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	hap := e2e.Require(t, "haproxy")[0]
	cluster := natstest.StartCluster(t, 3)
	devices, each := *replicaDevices, *replicaReadings
	const window = 16

	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	nc, err := nats.Connect(cluster.URL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	stream, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "TELEMETRY", Subjects: []string{"telemetry.>"},
		Storage: natsjs.FileStorage, Replicas: 3, Duplicates: 5 * time.Minute})
	require.NoError(t, err)

	dir := t.TempDir()
	ca, err := pki.NewCA("replicas CA")
	require.NoError(t, err)
	cert, err := ca.Server("gateway.test")
	require.NoError(t, err)
	require.NoError(t, pki.WriteFiles(cert, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")))
	var gws []*replica
	for range 3 {
		gws = append(gws, startReplica(t, "-tls-cert", filepath.Join(dir, "tls.crt"), "-tls-key", filepath.Join(dir, "tls.key"),
			"-proxy-trusted", "127.0.0.200", "-nats-url", cluster.URL(), "-nats-stream", "TELEMETRY", "-nats-ack-timeout", "2s"))
	}

	// HAProxy: round robin over the replicas, a PROXY v2 header on each
	// connection, another replica when one refuses the connection.
	front := fmt.Sprintf("127.0.0.1:%d", e2e.FreePorts(t, 1)[0])
	var servers strings.Builder
	for i, g := range gws {
		fmt.Fprintf(&servers, "    server gw%d %s send-proxy-v2\n", i+1, g.addr)
	}
	hapConf := fmt.Sprintf(`global
    nbthread 1
defaults
    mode tcp
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch
frontend mqtts
    bind %s
    default_backend gateways
backend gateways
    balance roundrobin
    source 127.0.0.200
%s`, front, servers.String())
	startHAP := func() (*haproxy.Process, error) {
		hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
		defer hcancel()
		return haproxy.Start(hctx, haproxy.Config{Path: hap, Text: hapConf})
	}
	var hp atomic.Pointer[haproxy.Process]
	p, err := startHAP()
	require.NoError(t, err)
	hp.Store(p)
	defer func() {
		if p := hp.Load(); p != nil {
			p.Stop()
		}
	}()

	var (
		ackedTotal atomic.Int64
		connects   atomic.Int64
		resent     atomic.Int64
		events     []string
		evMu       sync.Mutex
		chaos      sync.WaitGroup
	)
	event := func(format string, a ...any) {
		evMu.Lock()
		events = append(events, fmt.Sprintf("after %d acknowledgements: ", ackedTotal.Load())+fmt.Sprintf(format, a...))
		evMu.Unlock()
	}
	// The chaos, each once, at a quarter, half and three quarters.
	steps := []func(){
		func() {
			hp.Swap(nil).Stop()
			p, err := startHAP()
			if assert.NoError(t, err, "HAProxy restart") {
				hp.Store(p)
				event("HAProxy restarted")
			}
		},
		func() {
			if assert.NoError(t, gws[1].cmd.Process.Kill()) {
				<-gws[1].exited
				event("gateway %s killed (SIGKILL)", gws[1].addr)
			}
		},
		func() {
			ictx, icancel := context.WithTimeout(ctx, 10*time.Second)
			defer icancel()
			info, err := stream.Info(ictx)
			if !assert.NoError(t, err, "stream info") || info.Cluster == nil {
				return
			}
			for _, nd := range cluster.Nodes {
				if nd.Name == info.Cluster.Leader {
					nd.Kill()
					event("NATS node %s, the stream's leader, killed (SIGKILL)", nd.Name)
				}
			}
		},
	}
	var stepOnce [3]sync.Once
	total := devices * each

	acked := make([][]bool, devices)
	start := time.Now()
	var wg sync.WaitGroup
	for d := range devices {
		acked[d] = make([]bool, each)
		wg.Go(func() {
			id := fmt.Sprintf("dev%02d", d)
			cfg := device.Config{
				ID: id, Version: byte(4 + d%2), Addr: front,
				Local:   netip.AddrFrom4([4]byte{127, 0, 2, byte(d + 1)}),
				TLS:     &tls.Config{RootCAs: ca.Pool(), ServerName: "gateway.test"},
				Timeout: 5 * time.Second,
			}
			var mu sync.Mutex
			for attempt := 0; ctx.Err() == nil; attempt++ {
				var todo []int
				mu.Lock()
				for seq, ok := range acked[d] {
					if !ok {
						todo = append(todo, seq)
					}
				}
				mu.Unlock()
				if len(todo) == 0 {
					return
				}
				if attempt > 0 {
					resent.Add(int64(len(todo)))
				}
				c, err := device.Connect(ctx, cfg)
				if err != nil {
					select {
					case <-time.After(50 * time.Millisecond):
					case <-ctx.Done():
					}
					continue
				}
				connects.Add(1)
				sem := make(chan struct{}, window)
				var inflight sync.WaitGroup
				for _, seq := range todo {
					select {
					case <-c.Lost():
					case sem <- struct{}{}:
					}
					select {
					case <-c.Lost():
						continue
					default:
					}
					inflight.Go(func() {
						defer func() { <-sem }()
						if c.Publish(ctx, "telemetry/"+id, 1, device.Reading(id, uint64(seq), 20)) != nil {
							return
						}
						mu.Lock()
						acked[d][seq] = true
						mu.Unlock()
						n := ackedTotal.Add(1)
						for i := range steps {
							if n == int64(total*(i+1)/4) {
								chaos.Add(1)
								go stepOnce[i].Do(func() { defer chaos.Done(); steps[i]() })
							}
						}
					})
				}
				inflight.Wait()
				c.Close()
			}
		})
	}
	wg.Wait()
	chaos.Wait()
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		var dump strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Logf("events: %q\ngoroutines:\n%s", events, &dump)
	}
	require.NoError(t, ctx.Err(), "not done in time: %d of %d acknowledged", ackedTotal.Load(), total)
	for d := range devices {
		for seq := range each {
			require.True(t, acked[d][seq], "dev%02d/%d never acknowledged", d, seq)
		}
	}
	for _, e := range events {
		t.Log(e)
	}
	require.Len(t, events, 3, "every chaos step ran")

	// Read the whole stream back (the cluster may still be electing the
	// stream's leader, and this test's connection may have been to the node
	// that was killed: each attempt has a connection and a deadline of its
	// own, and one that fails is tried again).
	var (
		seen map[string]int
		bad  []string
	)
	for attempt := 1; ; attempt++ {
		seen, bad, err = readStream(t.Context(), cluster.URL(), "TELEMETRY", func(rec sink.Record, msgID string) bool {
			d := 0
			fmt.Sscanf(rec.Device, "dev%02d", &d)
			from := fmt.Sprintf("127.0.2.%d", d+1)
			p := rec.Provenance
			return msgID == jetstream.MsgID(rec.Device, rec.Seq, "") && p.Client == from && p.Source == "proxy-protocol" &&
				p.Via == "127.0.0.200" && strings.HasPrefix(p.Peer, "127.0.0.200:") && strings.HasPrefix(p.ProxySource, from+":") &&
				p.ProxyDestination == front && p.ClientID == rec.Device && p.TLSServerName == "gateway.test"
		})
		if err == nil || attempt == 4 {
			break
		}
		t.Logf("reading the stream: %v; again", err)
		time.Sleep(500 * time.Millisecond) // the cluster recovers on its own time
	}
	require.NoError(t, err, "reading the stream")
	msgs, twice := 0, 0
	for _, n := range seen {
		msgs += n
		if n > 1 {
			twice++
		}
	}
	t.Logf("%d devices x %d QoS 1 readings through 3 replicas in %v; %d connections (%d reconnects), %d readings still unacknowledged at a reconnect",
		devices, each, elapsed.Round(time.Millisecond), connects.Load(), connects.Load()-int64(devices), resent.Load())
	t.Logf("stream: %d messages, %d distinct ids, %d ids stored more than once, %d without the right provenance",
		msgs, len(seen), twice, len(bad))
	assert.Equal(t, total, msgs, "messages in the stream")
	assert.Len(t, seen, total, "distinct message ids")
	assert.Zero(t, twice, "ids stored more than once")
	assert.Empty(t, bad, "records without their provenance")
	for d := range devices {
		for seq := range each {
			if id := jetstream.MsgID(fmt.Sprintf("dev%02d", d), uint64(seq), ""); seen[id] != 1 {
				assert.Fail(t, "acknowledged reading not in the stream exactly once", "%s: %d times", id, seen[id])
			}
		}
	}
	assert.Greater(t, connects.Load(), int64(devices), "devices reconnected")
}

// readStream reads every message of the stream name through a connection
// of its own to url, within 30 seconds, and counts them by message id; bad
// collects the records that are not one or that ok refuses. It reads as
// many messages as the stream says it holds: a fetch that finds nothing
// within its wait (a busy runner, a leader still being elected) is not
// the end of the stream.
func readStream(ctx context.Context, url, name string, ok func(rec sink.Record, msgID string) bool) (seen map[string]int, bad []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		return nil, nil, err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, nil, err
	}
	stream, err := js.Stream(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, nil, err
	}
	cons, err := stream.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{})
	if err != nil {
		return nil, nil, err
	}
	seen = map[string]int{}
	var read uint64
	for read < info.State.Msgs {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("read %d of the stream's %d messages: %w", read, info.State.Msgs, err)
		}
		batch, err := cons.Fetch(500, natsjs.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, nil, err
		}
		for m := range batch.Messages() {
			read++
			var rec sink.Record
			msgID := m.Headers().Get(natsjs.MsgIDHeader)
			seen[msgID]++
			if json.Unmarshal(m.Data(), &rec) != nil || !ok(rec, msgID) {
				bad = append(bad, string(m.Data()))
			}
		}
		if err := batch.Error(); err != nil {
			return nil, nil, err
		}
	}
	return seen, bad, nil
}
