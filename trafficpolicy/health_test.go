package trafficpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wire renders a response the way the golden files hold it: the status
// line, the headers kube-proxy sets, a blank line and the body.
func wire(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\n", resp.Proto, resp.Status)
	for _, k := range []string{"Content-Type", "X-Content-Type-Options", "X-Load-Balancing-Endpoint-Weight"} {
		require.Len(t, resp.Header.Values(k), 1, "header %s: want one value", k)
		fmt.Fprintf(&b, "%s: %s\n", k, resp.Header.Get(k))
	}
	b.WriteString("\n")
	b.Write(body)
	return b.Bytes()
}

// TestHealthServerKubeProxyGolden compares the answer byte for byte with
// kube-proxy's, for 0, 1 and 2 local endpoints and an unhealthy proxy. The
// golden files are written by hand from the template in
// pkg/proxy/healthcheck/service_health.go (dedent of a tab-indented
// fmt.Sprintf, trimmed of newlines), not by -update: they are the reference.
func TestHealthServerKubeProxyGolden(t *testing.T) {
	tests := []struct {
		file    string
		eps     func(r *Registry)
		healthy bool
	}{
		{"health_0_endpoints.golden", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointTerminating) // only terminating: 0
		}, true},
		{"health_1_endpoint.golden", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
			r.Set(ep("10.244.1.5:1883"), EndpointReady)
		}, true},
		{"health_2_endpoints.golden", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
			r.Set(ep("10.244.1.6:8883"), EndpointReady)
			r.Set(ep("10.244.1.7:8883"), EndpointTerminating)
		}, true},
		{"health_proxy_unhealthy.golden", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
			r.Set(ep("10.244.1.6:8883"), EndpointReady)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var r Registry
			tt.eps(&r)
			hs, err := NewHealthServer(HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &r, ProxyHealthy: func() bool { return tt.healthy }})
			require.NoError(t, err)
			srv := httptest.NewServer(hs)
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/healthz")
			require.NoError(t, err)
			got := wire(t, resp)
			want, err := os.ReadFile(filepath.Join("testdata", tt.file))
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "answer differs from kube-proxy's")
		})
	}
}

// TestHealthServerAnyPathAndMethod pins that kube-proxy's handler is the
// whole server: no mux, so every path and method get the same answer.
func TestHealthServerAnyPathAndMethod(t *testing.T) {
	var r Registry
	r.Set(ep("10.244.1.5:8883"), EndpointReady)
	hs, err := NewHealthServer(HealthConfig{Namespace: "default", Name: "web", Endpoints: &r})
	require.NoError(t, err)
	srv := httptest.NewServer(hs)
	defer srv.Close()
	for _, tt := range []struct{ method, path string }{
		{"GET", "/healthz"}, {"GET", "/"}, {"POST", "/anything/else"}, {"OPTIONS", "/"}, {"HEAD", "/healthz"}, {"DELETE", "/x?y=z"},
	} {
		req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode, "%s %s", tt.method, tt.path)
		assert.Equal(t, "1", resp.Header.Get("X-Load-Balancing-Endpoint-Weight"), "%s %s: weight", tt.method, tt.path)
		if tt.method != "HEAD" {
			assert.True(t, bytes.HasSuffix(body, []byte(`"serviceProxyHealthy": true`+"\n}")), "%s %s: body %q", tt.method, tt.path, body)
		}
	}
}

func TestHealthServerFollowsChanges(t *testing.T) {
	var r Registry
	var healthy atomic.Bool
	healthy.Store(true)
	hs, _ := NewHealthServer(HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &r, ProxyHealthy: healthy.Load})
	code := func() int {
		rec := httptest.NewRecorder()
		hs.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		return rec.Code
	}
	steps := []struct {
		name string
		do   func()
		want int
	}{
		{"no endpoints", func() {}, 503},
		{"endpoint becomes ready", func() { r.Set(ep("10.244.1.5:8883"), EndpointReady) }, 200},
		{"proxy unhealthy", func() { healthy.Store(false) }, 503},
		{"proxy healthy again", func() { healthy.Store(true) }, 200},
		{"endpoint terminating: drain", func() { r.Set(ep("10.244.1.5:8883"), EndpointTerminating) }, 503},
		{"replacement ready", func() { r.Set(ep("10.244.1.9:8883"), EndpointReady) }, 200},
		{"old one removed", func() { r.Remove(ep("10.244.1.5:8883")) }, 200},
	}
	for _, s := range steps {
		s.do()
		require.Equal(t, s.want, code(), s.name)
	}
}

func TestNewHealthServerErrors(t *testing.T) {
	var r Registry
	for _, cfg := range []HealthConfig{
		{},
		{Namespace: "iot", Endpoints: &r},
		{Name: "x", Endpoints: &r},
		{Namespace: "iot", Name: "x"},
		// Names %q would quote with escapes JSON does not have: the body
		// was no longer JSON.
		{Namespace: "iot\x01", Name: "x", Endpoints: &r},
		{Namespace: "iot", Name: "x\xff", Endpoints: &r},
		{Namespace: "iot", Name: "x\a", Endpoints: &r},
		{Namespace: "iot", Name: "x\U000e0001", Endpoints: &r},
	} {
		_, err := NewHealthServer(cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, "NewHealthServer(%+v)", cfg)
	}
}

// TestHealthServerBodyIsJSON pins that every name NewHealthServer accepts
// gives a JSON body that reads back as the name, quotes and backslashes
// included.
func TestHealthServerBodyIsJSON(t *testing.T) {
	var r Registry
	for _, name := range []string{"mqtt-gw", `a"b`, `a\b`, "café", "日本", "a b"} {
		hs, err := NewHealthServer(HealthConfig{Namespace: "iot", Name: name, Endpoints: &r})
		require.NoError(t, err, name)
		rec := httptest.NewRecorder()
		hs.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		var body struct {
			Service struct{ Namespace, Name string }
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), "%q: body %s", name, rec.Body)
		assert.Equal(t, name, body.Service.Name)
	}
}

type discardResponse struct{ h http.Header }

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardResponse) WriteHeader(int)             {}

func BenchmarkHealthServer(b *testing.B) {
	var r Registry
	r.Set(ep("10.244.1.5:8883"), EndpointReady)
	hs, _ := NewHealthServer(HealthConfig{Namespace: "iot", Name: "mqtt-gw", Endpoints: &r})
	req := httptest.NewRequest("GET", "/healthz", nil)
	b.Run("ServeHTTP", func(b *testing.B) {
		b.ReportAllocs()
		w := &discardResponse{h: http.Header{}}
		for b.Loop() {
			hs.ServeHTTP(w, req)
		}
	})
	b.Run("ServeHTTPParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := &discardResponse{h: http.Header{}}
			for pb.Next() {
				hs.ServeHTTP(w, req)
			}
		})
	})
}

// TestHealthServerZeroValue pins that the zero HealthServer fails closed: a
// load balancer probing it takes the node out (503), where it used to get a
// nil-pointer panic, which net/http turns into a dropped connection.
func TestHealthServerZeroValue(t *testing.T) {
	var hs HealthServer
	assert.Equal(t, HealthStatus{ProxyHealthy: true}, hs.Status())
	rec := httptest.NewRecorder()
	hs.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "0", rec.Header().Get("X-Load-Balancing-Endpoint-Weight"))
}
