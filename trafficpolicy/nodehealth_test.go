package trafficpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kubeProxyHealth mirrors kube-proxy's ProxyHealth and ProxierHealth
// (pkg/proxy/healthcheck/proxy_health.go), whose json.Marshal output is the
// oracle for the node health server's body.
type kubeProxyHealth struct {
	LastUpdated  time.Time                    `json:"lastUpdated"`
	CurrentTime  time.Time                    `json:"currentTime"`
	NodeEligible *bool                        `json:"nodeEligible,omitempty"`
	Healthy      bool                         `json:"healthy"`
	Status       map[string]kubeProxierHealth `json:"status,omitempty"`
}

type kubeProxierHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// fakeClock is a settable time source.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newNodeHealth(t *testing.T, clk *fakeClock, checks ...DataPathCheck) *NodeHealthServer {
	t.Helper()
	s, err := NewNodeHealthServer(NodeHealthConfig{HealthTimeout: time.Minute, Checks: checks, Now: clk.now})
	require.NoError(t, err)
	return s
}

func get(t *testing.T, h http.Handler, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Header(), rec.Body.String()
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func ptrTo[T any](v T) *T { return &v }

// TestNodeHealthKubeProxyBody compares every answer with json.Marshal of
// kube-proxy's own types, for the states KEP-3836 distinguishes.
func TestNodeHealthKubeProxyBody(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	t1 := t0.Add(2 * time.Second)
	now := t0.Add(5 * time.Second)
	eligible := NodeState{Known: true}
	tests := []struct {
		name        string
		node        NodeState
		setup       func(s *NodeHealthServer, clk *fakeClock)
		wantHealthz int
		healthz     kubeProxyHealth
		wantLivez   int
		livez       kubeProxyHealth
	}{
		{"starting: no family updated yet, node not seen", NodeState{}, func(*NodeHealthServer, *fakeClock) {},
			503, kubeProxyHealth{CurrentTime: now, NodeEligible: ptrTo(false), Healthy: true},
			200, kubeProxyHealth{LastUpdated: now, CurrentTime: now, Healthy: true}},
		{"dual stack, eligible", eligible, func(s *NodeHealthServer, clk *fakeClock) {
			clk.t = t0
			s.Updated(IPv6)
			clk.t = t1
			s.Updated(IPv4)
		},
			200, kubeProxyHealth{LastUpdated: now, CurrentTime: now, NodeEligible: ptrTo(true), Healthy: true,
				Status: map[string]kubeProxierHealth{"IPv4": {t1, true}, "IPv6": {t0, true}}},
			200, kubeProxyHealth{LastUpdated: now, CurrentTime: now, Healthy: true,
				Status: map[string]kubeProxierHealth{"IPv4": {t1, true}, "IPv6": {t0, true}}}},
		{"tainted by the autoscaler: drain, but stay live", NodeState{Known: true, Taints: []string{"example.com/x", ToBeDeletedTaint}},
			func(s *NodeHealthServer, clk *fakeClock) { clk.t = t0; s.Updated(IPv4) },
			503, kubeProxyHealth{LastUpdated: t0, CurrentTime: now, NodeEligible: ptrTo(false), Healthy: true,
				Status: map[string]kubeProxierHealth{"IPv4": {t0, true}}},
			200, kubeProxyHealth{LastUpdated: now, CurrentTime: now, Healthy: true,
				Status: map[string]kubeProxierHealth{"IPv4": {t0, true}}}},
		{"being deleted", NodeState{Known: true, Deleting: true},
			func(s *NodeHealthServer, clk *fakeClock) { clk.t = t0; s.Updated(IPv4) },
			503, kubeProxyHealth{LastUpdated: t0, CurrentTime: now, NodeEligible: ptrTo(false), Healthy: true,
				Status: map[string]kubeProxierHealth{"IPv4": {t0, true}}},
			200, kubeProxyHealth{LastUpdated: now, CurrentTime: now, Healthy: true,
				Status: map[string]kubeProxierHealth{"IPv4": {t0, true}}}},
		{"an update queued for less than the timeout", eligible, func(s *NodeHealthServer, clk *fakeClock) {
			clk.t = t0
			s.Updated(IPv4)
			clk.t = now.Add(-time.Minute + time.Nanosecond)
			s.QueuedUpdate(IPv4)
		},
			200, kubeProxyHealth{LastUpdated: now, CurrentTime: now, NodeEligible: ptrTo(true), Healthy: true,
				Status: map[string]kubeProxierHealth{"IPv4": {t0, true}}},
			200, kubeProxyHealth{LastUpdated: now, CurrentTime: now, Healthy: true,
				Status: map[string]kubeProxierHealth{"IPv4": {t0, true}}}},
		{"an update queued for the timeout: that family is unhealthy", eligible, func(s *NodeHealthServer, clk *fakeClock) {
			clk.t = t0
			s.Updated(IPv4)
			s.Updated(IPv6)
			clk.t = now.Add(-time.Minute)
			s.QueuedUpdate(IPv6)
			clk.t = now.Add(-time.Second)
			s.QueuedUpdate(IPv6) // only the oldest pending update counts
		},
			503, kubeProxyHealth{LastUpdated: t0, CurrentTime: now, NodeEligible: ptrTo(true), Healthy: false,
				Status: map[string]kubeProxierHealth{"IPv4": {t0, true}, "IPv6": {t0, false}}},
			503, kubeProxyHealth{LastUpdated: t0, CurrentTime: now, Healthy: false,
				Status: map[string]kubeProxierHealth{"IPv4": {t0, true}, "IPv6": {t0, false}}}},
		// kube-proxy's Health() judges only the families in lastUpdatedMap
		// ("the proxier is healthy while it's starting up"): a queued update
		// of a family that never synced makes nothing unhealthy.
		{"an update queued past the timeout by a family never updated: starting up", eligible, func(s *NodeHealthServer, clk *fakeClock) {
			clk.t = t0
			s.Updated(IPv4)
			clk.t = now.Add(-time.Hour)
			s.QueuedUpdate(IPv6)
		},
			200, kubeProxyHealth{LastUpdated: now, CurrentTime: now, NodeEligible: ptrTo(true), Healthy: true,
				Status: map[string]kubeProxierHealth{"IPv4": {t0, true}}},
			200, kubeProxyHealth{LastUpdated: now, CurrentTime: now, Healthy: true,
				Status: map[string]kubeProxierHealth{"IPv4": {t0, true}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{}
			s := newNodeHealth(t, clk)
			s.SetNode(tt.node)
			tt.setup(s, clk)
			clk.t = now
			for _, c := range []struct {
				path string
				code int
				want kubeProxyHealth
			}{{"/healthz", tt.wantHealthz, tt.healthz}, {"/livez", tt.wantLivez, tt.livez}} {
				code, hdr, body := get(t, s, c.path)
				assert.Equal(t, c.code, code, "%s: status", c.path)
				assert.Equal(t, mustJSON(t, c.want), body, "%s: body", c.path)
				assert.Equal(t, "application/json", hdr.Get("Content-Type"), "%s: headers", c.path)
				assert.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"), "%s: headers", c.path)
			}
		})
	}
}

// Other paths answer as kube-proxy's http.ServeMux does.
func TestNodeHealthPaths(t *testing.T) {
	s := newNodeHealth(t, &fakeClock{})
	ref := http.NewServeMux()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	ref.Handle("/healthz", ok)
	ref.Handle("/livez", ok)
	for _, path := range []string{"/", "/healthz/", "/readyz", "/healthz?x=1", "//healthz", "/a/../livez", "/HEALTHZ"} {
		code, _, body := get(t, s, path)
		wantCode, _, wantBody := get(t, ref, path)
		routed := wantCode == http.StatusOK // reached kube-proxy's handler: a health answer, 200 or 503
		if routed {
			assert.True(t, strings.HasPrefix(body, `{"lastUpdated":`), "%s: %d %q, kube-proxy's handler answers", path, code, body)
		} else {
			assert.Equal(t, wantCode, code, "%s: status, as kube-proxy's mux", path)
			assert.Equal(t, wantBody, body, "%s: body, as kube-proxy's mux", path)
		}
	}
}

// A failing data-path check drains the node (/healthz 503 naming it) but
// does not make the proxy look dead (/livez 200), and the body keeps
// kube-proxy's "healthy" (the proxiers' health).
func TestNodeHealthDataPathCheck(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0).UTC()}
	var cniDown bool
	var gotDeadline bool
	s := newNodeHealth(t, clk,
		DataPathCheck{Name: "cni", Check: func(ctx context.Context) error {
			_, gotDeadline = ctx.Deadline()
			if cniDown {
				return errors.New("cni plugin not initialized")
			}
			return nil
		}},
		DataPathCheck{Name: "route", Check: func(context.Context) error { return nil }})
	s.SetNode(NodeState{Known: true})
	s.Updated(IPv4)
	code, _, body := get(t, s, "/healthz")
	require.Equal(t, 200, code, "checks passing: %s", body)
	require.NotContains(t, body, "failedChecks", "checks passing")
	require.True(t, gotDeadline, "the check had a deadline")
	hs, err := NewHealthServer(HealthConfig{Namespace: "ns", Name: "svc", Endpoints: new(Registry), ProxyHealthy: s.DataPathHealthy})
	require.NoError(t, err)
	cniDown = true
	code, _, body = get(t, s, "/healthz")
	assert.Equal(t, 503, code, "cni down: /healthz %s", body)
	assert.True(t, strings.HasSuffix(body, `"healthy":true,"status":{"IPv4":{"lastUpdated":"2001-09-09T01:46:40Z","healthy":true}},"failedChecks":["cni"]}`), "cni down: /healthz %s", body)
	code, _, _ = get(t, s, "/livez")
	assert.Equal(t, 200, code, "cni down: /livez")
	st := s.Status(context.Background())
	assert.False(t, st.Healthy(), "Status = %+v", st)
	assert.True(t, st.ProxyHealthy, "Status = %+v", st)
	assert.Len(t, st.FailedChecks, 1, "Status = %+v", st)
	assert.False(t, hs.Status().ProxyHealthy, "DataPathHealthy must fail the Service's health check")
	assert.True(t, s.ProxyHealthy(), "ProxyHealthy stays kube-proxy's")
}

// An AWS NLB with proxy protocol v2 puts a LOCAL header in front of its
// health checks; behind OptionalProxyHeader the node health server answers
// them like any other.
func TestNodeHealthBehindProxyHeader(t *testing.T) {
	s := newNodeHealth(t, &fakeClock{})
	s.SetNode(NodeState{Known: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	pl, err := OptionalProxyHeader(ln, time.Second)
	require.NoError(t, err)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(pl)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	local := append([]byte("\r\n\r\n\x00\r\nQUIT\n"), 0x20, 0x00, 0x00, 0x00) // v2 LOCAL, UNSPEC, no addresses
	io.WriteString(c, string(local)+"GET /livez HTTP/1.1\r\nHost: n\r\nConnection: close\r\n\r\n")
	resp, err := io.ReadAll(c)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(resp), "HTTP/1.1 200 OK\r\n"), "answer %q", resp)
	require.Contains(t, string(resp), `"healthy":true`)
}

func TestNewNodeHealthServerErrors(t *testing.T) {
	for _, cfg := range []NodeHealthConfig{
		{},
		{HealthTimeout: -time.Second},
		{HealthTimeout: time.Second, CheckTimeout: -1},
		{HealthTimeout: time.Second, Checks: []DataPathCheck{{Name: "x"}}},
		{HealthTimeout: time.Second, Checks: []DataPathCheck{{Check: func(context.Context) error { return nil }}}},
		// A name strconv.Quote escapes as JSON cannot made failedChecks
		// invalid JSON.
		{HealthTimeout: time.Second, Checks: []DataPathCheck{{Name: "cni\x00", Check: func(context.Context) error { return nil }}}},
	} {
		_, err := NewNodeHealthServer(cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, "NewNodeHealthServer(%+v)", cfg)
	}
}

// A NodeHealthServer is safe for concurrent use, as documented: answers
// served while the node's state and both families' updates change are
// each a 200 or a 503 with a body kube-proxy's types decode, the two
// agreeing. Run with -race.
func TestNodeHealthConcurrent(t *testing.T) {
	s, err := NewNodeHealthServer(NodeHealthConfig{HealthTimeout: time.Minute})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for _, f := range []IPFamily{IPv4, IPv6} {
		wg.Go(func() {
			for i := range 200 {
				s.SetNode(NodeState{Known: true, Taints: []string{ToBeDeletedTaint}[:i%2]})
				s.QueuedUpdate(f)
				s.Updated(f)
			}
		})
	}
	for _, path := range []string{"/healthz", "/livez"} {
		wg.Go(func() {
			for range 200 {
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				var h kubeProxyHealth
				if !assert.NoError(t, json.Unmarshal(rec.Body.Bytes(), &h), "%s: %q", path, rec.Body.String()) {
					return
				}
				healthy := h.Healthy && (path == "/livez" || h.NodeEligible == nil || *h.NodeEligible)
				assert.Equal(t, map[bool]int{true: http.StatusOK, false: http.StatusServiceUnavailable}[healthy], rec.Code, "%s: %q", path, rec.Body.String())
			}
		})
	}
	wg.Wait()
}

func TestNodeHealthAppendJSONNoAllocs(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0).UTC()}
	s := newNodeHealth(t, clk)
	s.SetNode(NodeState{Known: true})
	s.Updated(IPv4)
	s.Updated(IPv6)
	h := s.Status(context.Background())
	buf := make([]byte, 0, 512)
	assert.Zero(t, testing.AllocsPerRun(100, func() { buf = h.AppendJSON(buf[:0], true) }), "AppendJSON allocates")
}

func TestNodeProbes(t *testing.T) {
	for name, p := range map[string]NodeProbe{"GCP": GCPNodeProbe(), "AWS": AWSNodeProbe(), "Azure": AzureNodeProbe()} {
		assert.NoError(t, p.Timing.validate(), name)
		assert.Equal(t, uint16(10256), p.Port, name)
		assert.Equal(t, "/healthz", p.Path, name)
	}
	assert.Equal(t, Target{Name: "n1", URL: "http://[2001:db8::1]:10256/healthz"}, GCPNodeProbe().Target("n1", "[2001:db8::1]"))
	// An IPv6 node address as the Node object lists it, without brackets,
	// made "http://2001:db8::1:10256/healthz": a URL that parses, with host
	// 2001:db8::1:10256, and that no probe can dial.
	assert.Equal(t, Target{Name: "n1", URL: "http://[2001:db8::1]:10256/healthz"}, GCPNodeProbe().Target("n1", "2001:db8::1"))
	assert.Equal(t, Target{Name: "n2", URL: "http://10.0.0.11:10256/healthz"}, GCPNodeProbe().Target("n2", "10.0.0.11"))
	assert.Equal(t, Target{Name: "n3", URL: "http://node3.example:10256/healthz"}, GCPNodeProbe().Target("n3", "node3.example"))
}

func TestIPFamilyText(t *testing.T) {
	for _, f := range []IPFamily{IPv4, IPv6} {
		b, err := f.MarshalText()
		var back IPFamily
		assert.NoError(t, err, "%v", f)
		assert.NoError(t, back.UnmarshalText(b), "%v", f)
		assert.Equal(t, f, back, "%v: round trip", f)
		assert.Equal(t, f.String(), string(b), "%v: MarshalText and String", f)
	}
	assert.ErrorIs(t, new(IPFamily).UnmarshalText([]byte("ipv4")), ErrUnknownValue, "UnmarshalText(ipv4)")
}

// TestNodeHealthServerZeroValue pins that the zero NodeHealthServer fails
// closed instead of panicking: every request gets 503, and its methods work,
// with a queued update late at once.
func TestNodeHealthServerZeroValue(t *testing.T) {
	var s NodeHealthServer
	for _, path := range []string{"/healthz", "/livez", "/"} {
		code, hdr, _ := get(t, &s, path)
		assert.Equal(t, http.StatusServiceUnavailable, code, path)
		assert.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"), path)
	}
	s.SetNode(NodeState{Known: true})
	s.Updated(IPv4)
	assert.True(t, s.ProxyHealthy(), "after an update")
	s.QueuedUpdate(IPv4)
	assert.False(t, s.ProxyHealthy(), "an update queued with no HealthTimeout")
	assert.False(t, s.Status(context.Background()).Healthy())
}
