package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// client returns an HTTP client whose connections come from src.
func httpFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 5 * time.Second}
}

func post(t *testing.T, c *http.Client, url, xff, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHTTPIngest: readings posted through a trusted ingress (which appends
// X-Forwarded-For) are attributed to the device; a forged header from an
// untrusted peer is ignored; bad JSON is a 400 with the reason; a retry is
// recognised.
func TestHTTPIngest(t *testing.T) {
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.HTTPTrusted = clientip.MustParsePrefixSet("127.0.0.50")
		c.HTTPHeader = "X-Forwarded-For"
	})
	url := "http://" + e.g.HTTPAddr() + "/v1/telemetry"
	ingress, direct := httpFrom("127.0.0.50"), httpFrom("127.0.0.61")

	tests := []struct {
		name   string
		c      *http.Client
		xff    string
		body   string
		status int
		resp   string
		line   map[string]string
	}{
		{"through the ingress", ingress, "198.51.100.9, 127.0.0.16", `{"device":"h1","seq":1}`, 201, `{"duplicate":false,"id":"h1/1"}`,
			map[string]string{"client": "127.0.0.16", "client_source": "x-forwarded-for", "client_via": "127.0.0.50", "socket_peer": "127.0.0.50:*", "id": "h1/1", "duplicate": "false"}},
		{"retry", ingress, "127.0.0.16", `{"device":"h1","seq":1}`, 200, `{"duplicate":true,"id":"h1/1"}`,
			map[string]string{"client": "127.0.0.16", "id": "h1/1", "duplicate": "true"}},
		{"forged header from an untrusted peer", direct, "203.0.113.66", `{"device":"h2","seq":1}`, 201, `{"duplicate":false,"id":"h2/1"}`,
			map[string]string{"client": "127.0.0.61", "client_source": "socket", "id": "h2/1"}},
		{"bad JSON", ingress, "127.0.0.16", `{"device":"h1","seq":2,`, 400, `{"error":"reading: payload is not valid JSON: unexpected end of JSON input at byte 23"}`,
			map[string]string{"client": "127.0.0.16", "status": "400", "error": "reading: payload is not valid JSON*"}},
		{"no seq", ingress, "127.0.0.16", `{"device":"h1"}`, 400, `{"error":"reading: \"seq\" must be a non-negative integer: missing"}`, nil},
		{"garbage forwarding header", ingress, "127.0.0.16, not-an-ip", `{"device":"h1","seq":3}`, 400, `{"error":"cannot tell who the client is: malformed"}`,
			map[string]string{"decision": "malformed", "status": "400"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, tt.c, url, tt.xff, tt.body)
			if status != tt.status || strings.TrimSpace(body) != tt.resp {
				t.Errorf("got %d %s, want %d %s", status, body, tt.status, tt.resp)
			}
			if tt.line != nil {
				tt.line["msg"] = "http request"
				e.logs.wait(t, 3*time.Second, tt.line)
			}
		})
	}
	sum := e.summary(t)
	if sum.Lines != 2 || sum.Unique != 2 || sum.Invalid != 0 {
		t.Errorf("sink %+v", sum)
	}
	recs := e.records(t)
	if p := recs[0].Provenance; p.Client != "127.0.0.16" || p.Source != "x-forwarded-for" || p.Header != "X-Forwarded-For" || p.Via != "127.0.0.50" || recs[0].Protocol != "http" {
		t.Errorf("provenance %+v", p)
	}
}

func TestHTTPAllowlist(t *testing.T) {
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.Allow = clientip.MustParsePrefixSet("127.0.0.16/32")
	})
	url := "http://" + e.g.HTTPAddr() + "/v1/telemetry"
	if status, body := post(t, httpFrom("127.0.0.17"), url, "", `{"device":"a","seq":1}`); status != 403 {
		t.Errorf("outside the allowlist: %d %s", status, body)
	}
	if status, body := post(t, httpFrom("127.0.0.16"), url, "", `{"device":"a","seq":1}`); status != 201 {
		t.Errorf("inside the allowlist: %d %s", status, body)
	}
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "http request", "status": "403", "client": "127.0.0.17", "decision": "not_allowed"})
}

// TestAdmin: readiness follows the sink and draining; liveness is always
// up; /metrics has the gateway's counters; the kube-proxy-compatible health
// check reports the endpoint and fails while draining.
func TestAdmin(t *testing.T) {
	reg := promclient.NewRegistry()
	exp, err := prometheus.New(prometheus.WithRegisterer(reg), prometheus.WithoutTargetInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	e := start(t, func(c *Config) {
		c.AdminAddr = "127.0.0.1:0"
		c.KubeHealthAddr = "127.0.0.1:0"
		c.KubeService = "iot/mqtt-gw"
		c.MeterProvider = mp
		c.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	})
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	admin, kube := "http://"+e.g.AdminAddr(), "http://"+e.g.KubeHealthAddr()
	if code, body := get(admin + "/readyz"); code != 200 {
		t.Errorf("readyz %d %s", code, body)
	}
	if code, body := get(kube + "/healthz"); code != 200 || !strings.Contains(body, `"localEndpoints": 1`) || !strings.Contains(body, `"name": "mqtt-gw"`) {
		t.Errorf("kube health %d %s", code, body)
	}
	c, err := device.Connect(t.Context(), e.device("m1", 5, 2, "127.0.0.44:4400"))
	if err != nil {
		t.Fatal(err)
	}
	c.Publish(t.Context(), "telemetry/m1", 1, device.Reading("m1", 1, 1))
	c.Close()
	_, metrics := get(admin + "/metrics")
	for _, want := range []string{
		`gateway_messages_total{otel_scope_name="github.com/sourceip/sourceip/examples/telemetry-gateway",otel_scope_schema_url="",otel_scope_version="",outcome="accepted",protocol="mqtt"} 1`,
		`gateway_connections_total{otel_scope_name="github.com/sourceip/sourceip/examples/telemetry-gateway",otel_scope_schema_url="",otel_scope_version="",outcome="accepted",protocol="mqtt",reason="resolved"} 1`,
		`gateway_sink_commit_duration_seconds_count`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Drain: not ready at once, while the listeners still serve. The drain
	// period must outlast the checks below, on a busy runner too.
	done := make(chan error, 1)
	go func() { done <- e.g.Shutdown(context.Background(), 2*time.Second) }()
	deadline := time.Now().Add(2 * time.Second)
	for {
		code, body := get(admin + "/readyz")
		if code == 503 && strings.Contains(body, "draining") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz still %d %s while draining", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := get(kube + "/healthz"); code != 503 || !strings.Contains(body, `"localEndpoints": 0`) {
		t.Errorf("kube health while draining %d %s", code, body)
	}
	if code, _ := get(admin + "/livez"); code != 200 {
		t.Errorf("livez while draining %d", code)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestShutdownDisconnectsAndCommits: MQTT 5 clients are told the server is
// shutting down, and every acknowledged reading is in the sink afterwards.
func TestShutdownDisconnectsAndCommits(t *testing.T) {
	e := start(t, nil)
	c, err := device.Connect(t.Context(), e.device("s1", 5, 2, "127.0.0.45:4500"))
	if err != nil {
		t.Fatal(err)
	}
	for seq := range 5 {
		if err := c.Publish(t.Context(), "telemetry/s1", 1, device.Reading("s1", uint64(seq), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.g.Shutdown(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("client not disconnected by Shutdown")
	}
	if s := e.summary(t); s.Unique != 5 {
		t.Errorf("sink %+v", s)
	}
	if _, err := e.g.Sink().Append(t.Context(), &sink.Record{Device: "x"}); !errors.Is(err, sink.ErrClosed) {
		t.Errorf("sink still open after Shutdown: %v", err)
	}
}

func TestHTTPMasqueraded(t *testing.T) {
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.Masquerade = clientip.MustParsePrefixSet("127.0.0.150")
	})
	status, body := post(t, httpFrom("127.0.0.150"), "http://"+e.g.HTTPAddr()+"/v1/telemetry", "", `{"device":"hm","seq":1}`)
	if status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "http request", "masqueraded": "true", "decision": "masqueraded", "level": "WARN"})
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "CLIENTS ARE MASQUERADED*", "node": "127.0.0.150", "protocol": "http"})
	if recs := e.records(t); len(recs) != 1 || !recs[0].Provenance.Masqueraded {
		t.Errorf("records %+v", recs)
	}
}

// TestSlowBodyCutOff: a client that trickles its body is cut off at
// HTTPReadTimeout instead of holding its connection and goroutine, and
// nothing it sent is written (found by the project's review, 2026-12-02).
func TestSlowBodyCutOff(t *testing.T) {
	const timeout = 500 * time.Millisecond
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.HTTPTrusted = clientip.MustParsePrefixSet("127.0.0.50")
		c.HTTPHeader = "X-Forwarded-For"
		c.HTTPReadTimeout = timeout
	})
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.61")}}
	c, err := d.DialContext(t.Context(), "tcp", e.g.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"device":"slow","seq":1}`
	fmt.Fprintf(c, "POST /v1/telemetry HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	start := time.Now()
	for i := 0; i < len(body)-1; i++ {
		if _, err := c.Write([]byte{body[i]}); err != nil {
			break // the gateway closed the connection
		}
		time.Sleep(100 * time.Millisecond)
		if time.Since(start) > 5*timeout {
			break
		}
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK {
			t.Fatalf("a trickled body was accepted: %d", resp.StatusCode)
		}
	}
	if d := time.Since(start); d > 5*timeout+time.Second {
		t.Errorf("cut off after %v, want about %v", d, timeout)
	}
	for _, r := range e.records(t) {
		if r.Device == "slow" {
			t.Errorf("the slow client's reading was written: %+v", r)
		}
	}
}
