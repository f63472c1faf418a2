package trafficpolicy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newTestProber(t *testing.T, tm Timing, startUp bool, names ...string) *Prober {
	t.Helper()
	var targets []Target
	for _, n := range names {
		targets = append(targets, Target{Name: n, URL: "http://" + n + "/healthz"})
	}
	p, err := NewProber(ProberConfig{Targets: targets, Timing: tm, StartUp: startUp})
	require.NoError(t, err)
	return p
}

// TestProberRiseFall pins the thresholds: Rise consecutive successes to
// join, Fall consecutive failures to leave, and a result that agrees with
// the state resets the count (HAProxy's rise/fall, the clouds' healthy and
// unhealthy thresholds).
func TestProberRiseFall(t *testing.T) {
	p := newTestProber(t, HAProxyTiming(), false, "node1")
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 2 * time.Second) }
	steps := []struct {
		ok   bool
		want *Change
	}{
		{true, nil},
		{false, nil}, // resets the rise count
		{true, nil},
		{true, &Change{Target: "node1", Up: true, At: at(3), Since: at(2)}},
		{false, nil},
		{false, nil},
		{true, nil}, // resets the fall count
		{false, nil},
		{false, nil},
		{false, &Change{Target: "node1", Up: false, At: at(9), Since: at(7)}},
		{false, nil}, // already down
	}
	for i, s := range steps {
		c, changed, err := p.ObserveAt("node1", s.ok, at(i))
		require.NoError(t, err)
		require.Equal(t, s.want != nil, changed, "step %d (ok=%v): change %v", i, s.ok, c)
		if changed {
			require.Equal(t, *s.want, c, "step %d (ok=%v)", i, s.ok)
		}
	}
	_, _, err := p.ObserveAt("node9", true, t0)
	require.ErrorIs(t, err, ErrUnknownTarget, "unknown target")
}

func TestProberStartUp(t *testing.T) {
	p := newTestProber(t, HAProxyTiming(), true, "a", "b")
	require.Equal(t, []string{"a", "b"}, p.Members(), "both from the start")
	for i := range 3 {
		p.ObserveAt("b", false, t0.Add(time.Duration(i)*time.Second))
	}
	require.Equal(t, []string{"a"}, p.Members(), "after b's 3 failures")
	require.False(t, p.Up("b"), "after b's 3 failures")
	require.False(t, p.Up("nope"))
}

// simulatePhase probes every Interval starting at phase, with results from
// healthy(t), and returns the first change of target "n".
func simulatePhase(t *testing.T, tm Timing, startUp bool, phase time.Duration, healthy func(time.Time) bool) Change {
	t.Helper()
	p := newTestProber(t, tm, startUp, "n")
	for k := range 100 {
		at := t0.Add(phase + time.Duration(k)*tm.Interval)
		if c, changed, _ := p.ObserveAt("n", healthy(at), at); changed {
			return c
		}
	}
	require.FailNow(t, "no change in 100 probes")
	return Change{}
}

// TestBlackHoleWindow pins the window in which a load balancer still sends
// traffic to a node whose last local endpoint went away: interval × fall,
// give or take one interval, whatever the probes' phase relative to the
// change. The node is dropping traffic from the change on.
func TestBlackHoleWindow(t *testing.T) {
	for _, tt := range []struct {
		name string
		tm   Timing
	}{
		{"HAProxy", HAProxyTiming()}, {"AWS NLB", AWSNLBTiming()}, {"AWS LBC", AWSLBCTiming()},
		{"GCP", GCPTiming()}, {"Azure", AzureTiming()}, {"fall 1", Timing{Interval: time.Second, Rise: 1, Fall: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.tm.BlackHole()
			nominal := time.Duration(tt.tm.Fall) * tt.tm.Interval
			require.Equal(t, Window{Min: nominal - tt.tm.Interval, Max: nominal}, w, "want interval × fall - one interval … interval × fall")
			gone := t0.Add(20 * tt.tm.Interval)
			var seenMin, seenMax time.Duration = 1 << 62, 0
			for i := range 20 {
				phase := time.Duration(i) * tt.tm.Interval / 20
				c := simulatePhase(t, tt.tm, true, phase, func(at time.Time) bool { return at.Before(gone) })
				require.False(t, c.Up, "phase %v: change %v, want down", phase, c)
				d := c.At.Sub(gone)
				require.True(t, w.Contains(d), "phase %v: black hole of %v outside %v", phase, d, w)
				seenMin, seenMax = min(seenMin, d), max(seenMax, d)
			}
			require.Equal(t, w.Min, seenMin, "the probe that lands on the change gives the lower bound")
			require.LessOrEqual(t, w.Max-seenMax, tt.tm.Interval/20, "largest window %v does not approach the upper bound %v", seenMax, w.Max)
		})
	}
}

// TestRejoinWindow pins the rise side: a node whose endpoint comes back gets
// traffic again after interval × rise, give or take one interval.
func TestRejoinWindow(t *testing.T) {
	for _, tm := range []Timing{HAProxyTiming(), AWSNLBTiming(), GCPTiming(), AzureTiming()} {
		w := tm.Rejoin()
		require.Equal(t, Window{Min: time.Duration(tm.Rise-1) * tm.Interval, Max: time.Duration(tm.Rise) * tm.Interval}, w, "%+v: Rejoin", tm)
		back := t0.Add(20 * tm.Interval)
		for i := range 20 {
			phase := time.Duration(i) * tm.Interval / 20
			c := simulatePhase(t, tm, false, phase, func(at time.Time) bool { return !at.Before(back) })
			d := c.At.Sub(back)
			require.True(t, c.Up, "%+v phase %v: %v; want up", tm, phase, c)
			require.True(t, w.Contains(d), "%+v phase %v: %v after the endpoint came back; want up within %v", tm, phase, d, w)
		}
	}
}

func TestNewProberErrors(t *testing.T) {
	ok := []Target{{URL: "http://127.0.0.1:1/healthz"}}
	for _, cfg := range []ProberConfig{
		{},
		{Targets: ok},
		{Targets: ok, Timing: Timing{Interval: time.Second, Rise: 0, Fall: 1}},
		{Targets: ok, Timing: Timing{Interval: time.Second, Timeout: 2 * time.Second, Rise: 1, Fall: 1}},
		{Timing: HAProxyTiming()},
		{Targets: []Target{{Name: "x"}}, Timing: HAProxyTiming()},
		{Targets: []Target{{Name: "x", URL: "http://a"}, {Name: "x", URL: "http://b"}}, Timing: HAProxyTiming()},
		// A target URL that cannot be probed was accepted, and every probe
		// of it failed: the node never rose, a typo looking like an outage.
		{Targets: []Target{{Name: "no colon", URL: "http//10.0.0.11:32123/healthz"}}, Timing: HAProxyTiming()},
		{Targets: []Target{{Name: "no scheme", URL: "10.0.0.11:32123/healthz"}}, Timing: HAProxyTiming()},
		{Targets: []Target{{Name: "no host", URL: "http:///healthz"}}, Timing: HAProxyTiming()},
		{Targets: []Target{{Name: "not HTTP", URL: "tcp://10.0.0.11:32123"}}, Timing: HAProxyTiming()},
		{Targets: []Target{{Name: "unparsable", URL: "http://[2001:db8::1/healthz"}}, Timing: HAProxyTiming()},
	} {
		_, err := NewProber(cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, "NewProber(%+v)", cfg)
	}
}

func TestObserveAtNoAllocs(t *testing.T) {
	p := newTestProber(t, HAProxyTiming(), false, "n")
	i := 0
	require.Zero(t, testing.AllocsPerRun(100, func() { i++; p.ObserveAt("n", i%3 != 0, t0) }), "ObserveAt allocates")
}

// TestProberRunInjectedTicks drives the real HTTP prober against two
// kube-proxy-compatible health servers on loopback, with the clock injected
// through the ticks: node1 has an endpoint, node2 none; node1's endpoint then
// goes away.
func TestProberRunInjectedTicks(t *testing.T) {
	var r1, r2 Registry
	r1.Set(ep("10.244.1.5:8883"), EndpointReady)
	hs1, _ := NewHealthServer(HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &r1})
	hs2, _ := NewHealthServer(HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &r2})
	s1, s2 := httptest.NewServer(hs1), httptest.NewServer(hs2)
	defer s1.Close()
	defer s2.Close()

	tm := Timing{Interval: time.Second, Timeout: time.Second, Rise: 2, Fall: 2}
	p, err := NewProber(ProberConfig{Targets: []Target{{Name: "node1", URL: s1.URL + "/healthz"}, {Name: "node2", URL: s2.URL + "/healthz"}}, Timing: tm})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	rounds := make(chan struct{})
	changes := make(chan Change, 10)
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, ticks, func(c Change) { changes <- c }, rounds) }()

	at := func(i int) time.Time { return t0.Add(time.Duration(i) * tm.Interval) }
	gone := at(4).Add(-tm.Interval / 2)
	for i := range 8 {
		ticks <- at(i)
		<-rounds
		if i == 3 { // between the rounds at 3s and 4s the endpoint goes away
			r1.Set(ep("10.244.1.5:8883"), EndpointTerminating)
		}
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "run returned")
	close(changes)
	var got []Change
	for c := range changes {
		got = append(got, c)
	}
	want := []Change{
		{Target: "node1", Up: true, At: at(1), Since: at(0)},
		{Target: "node1", Up: false, At: at(5), Since: at(4)},
	}
	require.Equal(t, want, got, "changes")
	d := want[1].At.Sub(gone)
	require.True(t, tm.BlackHole().Contains(d), "black hole of %v outside %v", d, tm.BlackHole())
}

// TestProberRun checks the real ticker loop once, against a loopback server.
func TestProberRun(t *testing.T) {
	var r Registry
	r.Set(ep("10.244.1.5:8883"), EndpointReady)
	hs, _ := NewHealthServer(HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &r})
	srv := httptest.NewServer(hs)
	defer srv.Close()
	p, err := NewProber(ProberConfig{Targets: []Target{{URL: srv.URL}}, Timing: Timing{Interval: 10 * time.Millisecond, Rise: 1, Fall: 1}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	up := make(chan Change, 1)
	go p.Run(ctx, func(c Change) {
		select {
		case up <- c:
		default:
		}
	})
	select {
	case c := <-up:
		require.True(t, c.Up, "first change %v", c)
		require.Equal(t, srv.URL, c.Target, "first change")
	case <-ctx.Done():
		require.FailNow(t, "no change before the deadline")
	}
}

// TestProberNewConnectionPerProbe pins that the default client probes as a
// load balancer does, on a new connection every time: once the health
// server's listener is closed, the node fails its next probe, although the
// server still serves the connection an earlier probe opened (net/http keeps
// serving open connections after Serve returns). A kept-alive connection
// would keep the node in service.
func TestProberNewConnectionPerProbe(t *testing.T) {
	var r Registry
	r.Set(ep("10.244.1.5:8883"), EndpointReady)
	hs, err := NewHealthServer(HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &r})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns atomic.Int32
	srv := &http.Server{Handler: hs, ReadHeaderTimeout: 5 * time.Second, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	defer srv.Close()
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(ln) }()

	url := "http://" + ln.Addr().String() + "/healthz"
	p, err := NewProber(ProberConfig{Targets: []Target{{Name: "node1", URL: url}}, Timing: HAProxyTiming()})
	require.NoError(t, err)
	ctx := context.Background()
	require.True(t, p.probe(ctx, url), "first probe")
	require.True(t, p.probe(ctx, url), "second probe")
	require.Equal(t, int32(2), conns.Load(), "connections for two probes")
	ln.Close()
	<-served
	require.False(t, p.probe(ctx, url), "probe after the health listener closed")
}

// TestProberIgnoresProxyEnvironment pins that the default client dials the
// node itself even when HTTP_PROXY is set, as in pods behind an egress
// proxy: a load balancer's health check never goes through a proxy, and a
// proxy that answers would keep a dead node in service. net/http reads the
// proxy environment once per process, so the probe runs in a child process.
func TestProberIgnoresProxyEnvironment(t *testing.T) {
	const child = "TRAFFICPOLICY_TEST_PROXY_CHILD"
	if target := os.Getenv(child); target != "" {
		p, err := NewProber(ProberConfig{Targets: []Target{{URL: target}}, Timing: HAProxyTiming()})
		require.NoError(t, err)
		require.False(t, p.probe(context.Background(), target), "probe of a closed port answered through the proxy")
		return
	}
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { proxied.Add(1) }))
	defer proxy.Close()
	// A closed port, named by the unspecified address so that net/http does
	// not exempt it from the proxy as it does loopback addresses; below the
	// ephemeral range, so that no other test's listener takes it meanwhile.
	port := e2e.FreePorts(t, 1)[0]
	cmd := exec.Command(os.Args[0], "-test.run=^TestProberIgnoresProxyEnvironment$", "-test.count=1")
	cmd.Env = append(os.Environ(), child+"=http://0.0.0.0:"+strconv.Itoa(port)+"/healthz",
		"HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child: %s", out)
	require.Zero(t, proxied.Load(), "requests that reached the proxy")
}

// TestProberZeroValue pins that the zero Prober refuses to run with a typed
// error instead of panicking in time.NewTicker on its zero Interval.
func TestProberZeroValue(t *testing.T) {
	var p Prober
	require.ErrorIs(t, p.Run(context.Background(), nil), ErrInvalidConfig)
	_, _, err := p.ObserveAt("n", true, t0)
	require.ErrorIs(t, err, ErrUnknownTarget)
	require.Empty(t, p.Members())
}
