package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// lbAddr is the address test load balancers connect from.
var lbAddr = netip.MustParseAddr("127.0.0.200")

// logs captures the gateway's JSON log lines and lets tests wait for one.
type logs struct {
	mu      sync.Mutex
	lines   []map[string]any
	raw     bytes.Buffer
	changed chan struct{}
}

func newLogs() *logs { return &logs{changed: make(chan struct{})} }

func (l *logs) Write(p []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return 0, err
	}
	l.mu.Lock()
	l.lines = append(l.lines, m)
	l.raw.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	return len(p), nil
}

// tail returns the last n bytes of the log (from the start of a line).
func (l *logs) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.raw.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// match reports whether line has every field of want (values compared as
// strings; a want value ending in "*" is a prefix). A key "a.b" names field
// b of group a, as slog's JSON handler nests groups such as the "clientip"
// group of middleware.Attrs.
func match(line map[string]any, want map[string]string) bool {
	for k, v := range want {
		got, ok := field(line, k)
		if !ok {
			return false
		}
		gs := fmt.Sprint(got)
		if p, ok := strings.CutSuffix(v, "*"); ok {
			if !strings.HasPrefix(gs, p) {
				return false
			}
		} else if gs != v {
			return false
		}
	}
	return true
}

// field returns the value of key in line, looking into groups for "a.b".
func field(line map[string]any, key string) (any, bool) {
	group, rest, nested := strings.Cut(key, ".")
	if !nested {
		v, ok := line[key]
		return v, ok
	}
	m, ok := line[group].(map[string]any)
	if !ok {
		return nil, false
	}
	return field(m, rest)
}

// wait returns the first line matching want, waiting up to d.
func (l *logs) wait(t *testing.T, d time.Duration, want map[string]string) map[string]any {
	t.Helper()
	deadline := time.After(d)
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			if match(line, want) {
				l.mu.Unlock()
				return line
			}
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			l.mu.Lock()
			defer l.mu.Unlock()
			require.FailNow(t, "no matching log line", "want %v within %v; log:\n%s", want, d, l.raw.String())
			return nil
		}
	}
}

type env struct {
	g    *Gateway
	logs *logs
	ca   *pki.CA
	sink string
}

// start runs a gateway on loopback that trusts lbAddr as its load balancer,
// with cfg adjusted by mutate.
func start(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	ca, err := pki.NewCA("test CA")
	require.NoError(t, err)
	cert, err := ca.Server("gateway.test", "127.0.0.1")
	require.NoError(t, err)
	e := &env{logs: newLogs(), ca: ca, sink: filepath.Join(t.TempDir(), "telemetry.jsonl")}
	cfg := Config{
		MQTTAddr:     "127.0.0.1:0",
		ProxyTrusted: clientip.MustParsePrefixSet(lbAddr.String()),
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.Pool(),
			ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12},
		HandshakeTimeout: 2 * time.Second,
		ConnectTimeout:   2 * time.Second,
		Sink:             sink.Config{Path: e.sink},
		Logger:           slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	e.g, err = New(cfg)
	require.NoError(t, err)
	require.NoError(t, e.g.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, e.g.Shutdown(ctx, 0), "Shutdown")
		if t.Failed() {
			t.Logf("the gateway's log:\n%s", e.logs.tail(32<<10))
		}
	})
	return e
}

// device returns a device configuration that connects to the gateway from
// the load balancer's address with a PROXY header claiming src.
func (e *env) device(id string, version byte, proxy uint8, src string) device.Config {
	return device.Config{
		ID: id, Version: version, Addr: e.g.MQTTAddr(),
		Local: lbAddr, Proxy: proxy, Claim: netip.MustParseAddrPort(src),
		TLS:     &tls.Config{RootCAs: e.ca.Pool(), ServerName: "gateway.test"},
		Timeout: 5 * time.Second,
	}
}

func (e *env) summary(t *testing.T) sink.Summary {
	t.Helper()
	s, err := sink.SummarizeFile(e.sink)
	require.NoError(t, err)
	return s
}

// records reads the sink's records.
func (e *env) records(t *testing.T) []sink.Record {
	t.Helper()
	f, err := os.Open(e.sink)
	require.NoError(t, err)
	defer f.Close()
	out, err := sink.ReadAll(f)
	require.NoError(t, err)
	return out
}

// count returns how many lines match want.
func (l *logs) count(want map[string]string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if match(line, want) {
			n++
		}
	}
	return n
}

// counter returns the sum of the data points of the Int64 counter name whose
// attributes include attrs.
func counter(t *testing.T, r *sdkmetric.ManualReader, name string, attrs map[string]string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			dps, ok := m.Data.(metricdata.Sum[int64])
			if !ok { // a gauge
				dps = metricdata.Sum[int64]{DataPoints: m.Data.(metricdata.Gauge[int64]).DataPoints}
			}
			for _, dp := range dps.DataPoints {
				ok := true
				for k, v := range attrs {
					got, found := dp.Attributes.Value(attribute.Key(k))
					ok = ok && found && got.AsString() == v
				}
				if ok {
					n += dp.Value
				}
			}
		}
	}
	return n
}
