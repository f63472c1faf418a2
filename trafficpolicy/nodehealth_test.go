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
	"testing"
	"time"
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
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
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
				if code != c.code {
					t.Errorf("%s: status %d, want %d", c.path, code, c.code)
				}
				if want := mustJSON(t, c.want); body != want {
					t.Errorf("%s: body\n got %s\nwant %s", c.path, body, want)
				}
				if hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Content-Type-Options") != "nosniff" {
					t.Errorf("%s: headers %v", c.path, hdr)
				}
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
		if routed && !strings.HasPrefix(body, `{"lastUpdated":`) || !routed && (code != wantCode || body != wantBody) {
			t.Errorf("%s: %d %q, kube-proxy's mux %d %q", path, code, body, wantCode, wantBody)
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
	if code, _, body := get(t, s, "/healthz"); code != 200 || strings.Contains(body, "failedChecks") || !gotDeadline {
		t.Fatalf("checks passing: %d %s (check had a deadline: %v)", code, body, gotDeadline)
	}
	hs, err := NewHealthServer(HealthConfig{Namespace: "ns", Name: "svc", Endpoints: new(Registry), ProxyHealthy: s.DataPathHealthy})
	if err != nil {
		t.Fatal(err)
	}
	cniDown = true
	code, _, body := get(t, s, "/healthz")
	if code != 503 || !strings.HasSuffix(body, `"healthy":true,"status":{"IPv4":{"lastUpdated":"2001-09-09T01:46:40Z","healthy":true}},"failedChecks":["cni"]}`) {
		t.Errorf("cni down: /healthz %d %s", code, body)
	}
	if code, _, _ := get(t, s, "/livez"); code != 200 {
		t.Errorf("cni down: /livez %d, want 200", code)
	}
	if st := s.Status(context.Background()); st.Healthy() || !st.ProxyHealthy || len(st.FailedChecks) != 1 {
		t.Errorf("Status = %+v", st)
	}
	if hs.Status().ProxyHealthy || !s.ProxyHealthy() {
		t.Error("DataPathHealthy must fail the Service's health check while ProxyHealthy stays kube-proxy's")
	}
}

// An AWS NLB with proxy protocol v2 puts a LOCAL header in front of its
// health checks; behind OptionalProxyHeader the node health server answers
// them like any other.
func TestNodeHealthBehindProxyHeader(t *testing.T) {
	s := newNodeHealth(t, &fakeClock{})
	s.SetNode(NodeState{Known: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := OptionalProxyHeader(ln, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(pl)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	local := append([]byte("\r\n\r\n\x00\r\nQUIT\n"), 0x20, 0x00, 0x00, 0x00) // v2 LOCAL, UNSPEC, no addresses
	io.WriteString(c, string(local)+"GET /livez HTTP/1.1\r\nHost: n\r\nConnection: close\r\n\r\n")
	resp, err := io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(resp), "HTTP/1.1 200 OK\r\n") || !strings.Contains(string(resp), `"healthy":true`) {
		t.Fatalf("answer %q, %v", resp, err)
	}
}

func TestNewNodeHealthServerErrors(t *testing.T) {
	for _, cfg := range []NodeHealthConfig{
		{},
		{HealthTimeout: -time.Second},
		{HealthTimeout: time.Second, CheckTimeout: -1},
		{HealthTimeout: time.Second, Checks: []DataPathCheck{{Name: "x"}}},
		{HealthTimeout: time.Second, Checks: []DataPathCheck{{Check: func(context.Context) error { return nil }}}},
	} {
		if _, err := NewNodeHealthServer(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewNodeHealthServer(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

func TestNodeHealthAppendJSONNoAllocs(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0).UTC()}
	s := newNodeHealth(t, clk)
	s.SetNode(NodeState{Known: true})
	s.Updated(IPv4)
	s.Updated(IPv6)
	h := s.Status(context.Background())
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf = h.AppendJSON(buf[:0], true) }); n != 0 {
		t.Errorf("AppendJSON allocates %v times", n)
	}
}

func TestNodeProbes(t *testing.T) {
	for name, p := range map[string]NodeProbe{"GCP": GCPNodeProbe(), "AWS": AWSNodeProbe(), "Azure": AzureNodeProbe()} {
		if err := p.Timing.validate(); err != nil || p.Port != 10256 || p.Path != "/healthz" {
			t.Errorf("%s: %+v: %v", name, p, err)
		}
	}
	if got := GCPNodeProbe().Target("n1", "[2001:db8::1]"); got != (Target{Name: "n1", URL: "http://[2001:db8::1]:10256/healthz"}) {
		t.Errorf("Target = %+v", got)
	}
}

func TestIPFamilyText(t *testing.T) {
	for _, f := range []IPFamily{IPv4, IPv6} {
		b, err := f.MarshalText()
		var back IPFamily
		if err != nil || back.UnmarshalText(b) != nil || back != f || string(b) != f.String() {
			t.Errorf("%v: %q %v → %v", f, b, err, back)
		}
	}
	if err := new(IPFamily).UnmarshalText([]byte("ipv4")); !errors.Is(err, ErrUnknownValue) {
		t.Errorf("UnmarshalText(ipv4) = %v", err)
	}
}
