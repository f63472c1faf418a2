package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpFrom returns an HTTP client whose connections come from src.
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
	require.NoError(t, err)
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
			map[string]string{"clientip.client": "127.0.0.16", "clientip.source": "x-forwarded-for", "clientip.via": "127.0.0.50", "clientip.peer": "127.0.0.50:*", "id": "h1/1", "duplicate": "false"}},
		{"retry", ingress, "127.0.0.16", `{"device":"h1","seq":1}`, 200, `{"duplicate":true,"id":"h1/1"}`,
			map[string]string{"clientip.client": "127.0.0.16", "id": "h1/1", "duplicate": "true"}},
		{"forged header from an untrusted peer", direct, "203.0.113.66", `{"device":"h2","seq":1}`, 201, `{"duplicate":false,"id":"h2/1"}`,
			map[string]string{"clientip.client": "127.0.0.61", "clientip.source": "socket", "id": "h2/1"}},
		{"bad JSON", ingress, "127.0.0.16", `{"device":"h1","seq":2,`, 400, `{"error":"reading: payload is not valid JSON: unexpected end of JSON input at byte 23"}`,
			map[string]string{"clientip.client": "127.0.0.16", "status": "400", "problem": "reading: payload is not valid JSON*"}},
		{"no seq", ingress, "127.0.0.16", `{"device":"h1"}`, 400, `{"error":"reading: \"seq\" must be a non-negative integer: missing"}`, nil},
		{"garbage forwarding header", ingress, "127.0.0.16, not-an-ip", `{"device":"h1","seq":3}`, 400, `{"error":"cannot tell who the client is: malformed"}`,
			map[string]string{"decision": "malformed", "status": "400"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, tt.c, url, tt.xff, tt.body)
			assert.Equal(t, tt.status, status)
			assert.Equal(t, tt.resp, strings.TrimSpace(body))
			if tt.line != nil {
				tt.line["msg"] = "http request"
				e.logs.wait(t, 3*time.Second, tt.line)
			}
		})
	}
	sum := e.summary(t)
	assert.Equal(t, []int{2, 2, 0}, []int{sum.Lines, sum.Unique, sum.Invalid}, "sink lines, unique, invalid")
	recs := e.records(t)
	require.NotEmpty(t, recs)
	assert.Equal(t, "http", recs[0].Protocol)
	assert.Equal(t, sink.Provenance{Client: "127.0.0.16", Source: "x-forwarded-for", Header: "X-Forwarded-For", Via: "127.0.0.50",
		Peer: recs[0].Provenance.Peer}, recs[0].Provenance)
	assert.True(t, strings.HasPrefix(recs[0].Provenance.Peer, "127.0.0.50:"), "socket peer %s", recs[0].Provenance.Peer)
}

func TestHTTPAllowlist(t *testing.T) {
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.Allow = clientip.MustParsePrefixSet("127.0.0.16/32")
	})
	url := "http://" + e.g.HTTPAddr() + "/v1/telemetry"
	status, body := post(t, httpFrom("127.0.0.17"), url, "", `{"device":"a","seq":1}`)
	assert.Equal(t, 403, status, "outside the allowlist: %s", body)
	status, body = post(t, httpFrom("127.0.0.16"), url, "", `{"device":"a","seq":1}`)
	assert.Equal(t, 201, status, "inside the allowlist: %s", body)
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "http request", "status": "403", "clientip.client": "127.0.0.17", "decision": "not_allowed"})
}

// TestAdmin: readiness follows the sink and draining; liveness is always
// up; /metrics has the gateway's counters; the kube-proxy-compatible health
// check reports the endpoint and fails while draining.
func TestAdmin(t *testing.T) {
	reg := promclient.NewRegistry()
	exp, err := prometheus.New(prometheus.WithRegisterer(reg), prometheus.WithoutTargetInfo())
	require.NoError(t, err)
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
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	admin, kube := "http://"+e.g.AdminAddr(), "http://"+e.g.KubeHealthAddr()
	code, body := get(admin + "/readyz")
	assert.Equal(t, 200, code, "readyz %s", body)
	code, body = get(kube + "/healthz")
	assert.Equal(t, 200, code, "kube health %s", body)
	assert.Contains(t, body, `"localEndpoints": 1`)
	assert.Contains(t, body, `"name": "mqtt-gw"`)
	c, err := device.Connect(t.Context(), e.device("m1", 5, 2, "127.0.0.44:4400"))
	require.NoError(t, err)
	require.NoError(t, c.Publish(t.Context(), "telemetry/m1", 1, device.Reading("m1", 1, 1)))
	c.Close()
	_, metrics := get(admin + "/metrics")
	for _, want := range []string{
		`gateway_messages_total{otel_scope_name="github.com/sourceip/sourceip/examples/telemetry-gateway",otel_scope_schema_url="",otel_scope_version="(devel)",outcome="accepted",protocol="mqtt"} 1`,
		`gateway_connections_total{otel_scope_name="github.com/sourceip/sourceip/examples/telemetry-gateway",otel_scope_schema_url="",otel_scope_version="(devel)",outcome="accepted",protocol="mqtt",reason="resolved"} 1`,
		`gateway_sink_commit_duration_seconds_count`,
	} {
		assert.Contains(t, metrics, want)
	}
	// Drain: not ready at once, while the listeners still serve. The drain
	// period must outlast the checks below, on a busy runner too.
	done := make(chan error, 1)
	go func() { done <- e.g.Shutdown(context.Background(), 2*time.Second) }()
	require.Eventually(t, func() bool {
		code, body := get(admin + "/readyz")
		return code == 503 && strings.Contains(body, "draining")
	}, 2*time.Second, 10*time.Millisecond, "readyz while draining")
	code, body = get(kube + "/healthz")
	assert.Equal(t, 503, code, "kube health while draining %s", body)
	assert.Contains(t, body, `"localEndpoints": 0`)
	code, _ = get(admin + "/livez")
	assert.Equal(t, 200, code, "livez while draining")
	require.NoError(t, <-done)
}

// TestSideServersBoundHostileConnections: the admin and kube health
// servers hold no connection past sideTimeout, whether its peer idles after
// a probe (keep-alive slot hoarding) or trickles a request body: either
// would let anyone who reaches those ports use up the descriptors the
// device listeners share.
func TestSideServersBoundHostileConnections(t *testing.T) {
	e := start(t, func(c *Config) {
		c.AdminAddr = "127.0.0.1:0"
		c.KubeHealthAddr = "127.0.0.1:0"
		c.KubeService = "iot/mqtt-gw"
	})
	for _, srv := range []struct{ name, addr, path string }{{"admin", e.g.AdminAddr(), "/livez"}, {"kube health", e.g.KubeHealthAddr(), "/healthz"}} {
		for _, tt := range []struct{ name, request string }{
			{"idle after a probe", "GET " + srv.path + " HTTP/1.1\r\nHost: gw\r\n\r\n"},
			{"slow body", "POST " + srv.path + " HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\nx"},
		} {
			t.Run(srv.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				c, err := net.Dial("tcp", srv.addr)
				require.NoError(t, err)
				defer c.Close()
				_, err = io.WriteString(c, tt.request)
				require.NoError(t, err)
				// The client's deadline only keeps a failing test from hanging.
				require.NoError(t, c.SetReadDeadline(time.Now().Add(6*sideTimeout)))
				_, err = io.ReadAll(c)
				assert.NoError(t, err, "the server closes the connection (EOF), not the client's deadline")
			})
		}
	}
}

// TestShutdownDisconnectsAndCommits: MQTT 5 clients are told the server is
// shutting down, and every acknowledged reading is in the sink afterwards.
func TestShutdownDisconnectsAndCommits(t *testing.T) {
	e := start(t, nil)
	c, err := device.Connect(t.Context(), e.device("s1", 5, 2, "127.0.0.45:4500"))
	require.NoError(t, err)
	for seq := range 5 {
		require.NoError(t, c.Publish(t.Context(), "telemetry/s1", 1, device.Reading("s1", uint64(seq), 1)))
	}
	require.NoError(t, e.g.Shutdown(t.Context(), 0))
	select {
	case <-c.Lost():
	case <-time.After(3 * time.Second):
		require.FailNow(t, "client not disconnected by Shutdown")
	}
	assert.Equal(t, 5, e.summary(t).Unique)
	_, err = e.g.Sink().Append(t.Context(), &sink.Record{Device: "x"})
	assert.ErrorIs(t, err, sink.ErrClosed, "sink still open after Shutdown")
}

func TestHTTPMasqueraded(t *testing.T) {
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.Masquerade = clientip.MustParsePrefixSet("127.0.0.150")
	})
	status, body := post(t, httpFrom("127.0.0.150"), "http://"+e.g.HTTPAddr()+"/v1/telemetry", "", `{"device":"hm","seq":1}`)
	require.Equal(t, 201, status, body)
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "http request", "clientip.masqueraded": "true", "decision": "masqueraded", "level": "WARN"})
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "CLIENTS ARE MASQUERADED*", "node": "127.0.0.150", "protocol": "http"})
	recs := e.records(t)
	require.Len(t, recs, 1)
	assert.True(t, recs[0].Provenance.Masqueraded)
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
	require.NoError(t, err)
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
		require.NotContains(t, []int{http.StatusCreated, http.StatusOK}, resp.StatusCode, "a trickled body was accepted")
	}
	assert.Less(t, time.Since(start), 5*timeout+time.Second, "cut off after, want about %v", timeout)
	for _, r := range e.records(t) {
		assert.NotEqual(t, "slow", r.Device, "the slow client's reading was written: %+v", r)
	}
}

// TestHangUpWhileWaitingIsNotASinkFailure: HTTP clients that hang up while
// their readings wait for the group commit are not sink failures: no ERROR
// line, no sink_error count, but a canceled outcome, and the readings, which
// were queued, are written (attack trial: 3,200 POSTs closed at once gave
// 3,064 false "sink append failed: context canceled" errors).
func TestHangUpWhileWaitingIsNotASinkFailure(t *testing.T) {
	const clients = 20
	reader := sdkmetric.NewManualReader()
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	releaseOnce := sync.OnceFunc(func() { close(release) })
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		c.Sink.OnCommit = func(int, int, time.Duration, error) { // hold the committer after its first batch
			once.Do(func() { close(blocked) })
			<-release
		}
	})
	t.Cleanup(releaseOnce) // runs before start's Shutdown, which waits for the committer
	url := "http://" + e.g.HTTPAddr() + "/v1/telemetry"
	first := make(chan int, 1)
	go func() {
		resp, err := httpFrom("127.0.0.70").Post(url, "application/json", strings.NewReader(`{"device":"hold","seq":1}`))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-blocked
	ctx, hangUp := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(fmt.Sprintf(`{"device":"gone%d","seq":1}`, i)))
			resp, err := httpFrom("127.0.0.71").Do(req)
			if err == nil {
				resp.Body.Close()
			}
			assert.ErrorIs(t, err, context.Canceled, "client %d", i)
		})
	}
	require.Eventually(t, func() bool { return e.g.Sink().Stats().Queued == clients }, 5*time.Second, 5*time.Millisecond,
		"every reading waits for the commit")
	hangUp()
	wg.Wait()
	require.Eventually(t, func() bool {
		return e.logs.count(map[string]string{"msg": "http request", "canceled": "true"}) == clients
	},
		5*time.Second, 5*time.Millisecond, "a canceled access line per client that hung up")
	releaseOnce()
	require.Equal(t, http.StatusCreated, <-first)

	assert.Zero(t, e.logs.count(map[string]string{"level": "ERROR"}), "ERROR lines")
	assert.Zero(t, counter(t, reader, "gateway.messages", map[string]string{"outcome": "sink_error"}), "sink_error count")
	assert.EqualValues(t, clients, counter(t, reader, "gateway.messages", map[string]string{"protocol": "http", "outcome": "canceled"}))
	e.logs.wait(t, time.Second, map[string]string{"msg": "http request", "canceled": "true", "level": "INFO", "problem": "the client went away*"})
	require.NoError(t, e.g.Shutdown(t.Context(), 0))
	assert.Equal(t, clients+1, e.summary(t).Unique, "the abandoned readings were queued, so they are written")
}

// TestTooLargeBodyRefusedBeforeContinue: a request that announces a body
// larger than MaxPayload and asks for "Expect: 100-continue" is answered 413
// at once, without 100 Continue (RFC 9110 §10.1.1: a server that will refuse
// the request sends the final status instead). The gateway answered 100
// Continue, inviting the whole body, and refused it only after reading
// MaxPayload bytes of it (found by the command review, 2026-12-03).
func TestTooLargeBodyRefusedBeforeContinue(t *testing.T) {
	const limit = 1024
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.MaxPayload = limit
	})
	c, err := net.Dial("tcp", e.g.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/telemetry HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", 1<<30)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "the first answer to a request announcing 1 GiB")
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "http request", "status": "413", "problem": "reading: payload too large*"})

	// A body that fits is still taken after 100 Continue.
	req, err := http.NewRequest(http.MethodPost, "http://"+e.g.HTTPAddr()+"/v1/telemetry", strings.NewReader(`{"device":"hc","seq":1}`))
	require.NoError(t, err)
	req.Header.Set("Expect", "100-continue")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
}

// TestCrossSiteBrowserPostRefused: a page on another site that makes a
// browser inside the allowlist POST a reading (a "simple" request: text/plain,
// no CORS preflight) is refused with 403 and nothing is written, as the
// WebSocket listener refuses an upgrade from a foreign Origin; the reading
// was stored with the browser's address as its provenance, past -allow
// (found by the command review, 2026-12-03). Devices send neither Origin nor
// Sec-Fetch-Site and are served as before.
func TestCrossSiteBrowserPostRefused(t *testing.T) {
	e := start(t, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.Allow = clientip.MustParsePrefixSet("127.0.0.0/8")
	})
	url := "http://" + e.g.HTTPAddr() + "/v1/telemetry"
	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"a browser that sends Sec-Fetch-Site", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}},
		{"an older browser that sends only Origin", map[string]string{"Origin": "https://evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"device":"victim","seq":1}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "text/plain")
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", b)
		})
	}
	e.logs.wait(t, 3*time.Second, map[string]string{"msg": "http request", "status": "403", "problem": "cross-origin*"})
	status, body := post(t, http.DefaultClient, url, "", `{"device":"dev","seq":1}`)
	assert.Equal(t, http.StatusCreated, status, "a device's POST: %s", body)
	recs := e.records(t)
	require.Len(t, recs, 1, "what was written: %+v", recs)
	assert.Equal(t, "dev", recs[0].Device)
}

// TestHTTPRateLimitChargesEveryRequest: every POST is charged to the
// client's rate, valid or not, as every MQTT PUBLISH is; a client over its
// rate gets 429 with Retry-After and the RateLimit fields before its body
// is read. Invalid bodies were free (the rate was charged only once a
// reading parsed), so a client could make the gateway read and parse
// invalid bodies without end. Masqueraded clients are charged by the device
// their reading names, an invalid body to the node.
func TestHTTPRateLimitChargesEveryRequest(t *testing.T) {
	const invalid = `{"device":"a"}` // no seq
	t.Run("direct", func(t *testing.T) {
		e := start(t, func(c *Config) {
			c.HTTPAddr = "127.0.0.1:0"
			c.RateLimit, c.RateBurst = 0.01, 2
		})
		url := "http://" + e.g.HTTPAddr() + "/v1/telemetry"
		client := httpFrom("127.0.0.61")
		for range 2 {
			status, body := post(t, client, url, "", invalid)
			require.Equal(t, 400, status, body)
		}
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"device":"a","seq":1}`))
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 429, resp.StatusCode, "a valid reading after the burst went on invalid ones")
		assert.NotEmpty(t, resp.Header.Get("Retry-After"))
		assert.NotEmpty(t, resp.Header.Get("RateLimit"))
		status, body := post(t, httpFrom("127.0.0.62"), url, "", `{"device":"b","seq":1}`)
		assert.Equal(t, 201, status, "another client has its own bucket: %s", body)
		e.logs.wait(t, 3*time.Second, map[string]string{"msg": "http request", "status": "429", "clientip.client": "127.0.0.61"})
	})
	t.Run("masqueraded", func(t *testing.T) {
		node := "127.0.0.151"
		e := start(t, func(c *Config) {
			c.HTTPAddr = "127.0.0.1:0"
			c.Masquerade = clientip.MustParsePrefixSet(node)
			c.RateLimit, c.RateBurst = 0.01, 1
		})
		url := "http://" + e.g.HTTPAddr() + "/v1/telemetry"
		client := httpFrom(node)
		status, body := post(t, client, url, "", invalid)
		require.Equal(t, 400, status, body)
		status, body = post(t, client, url, "", invalid)
		assert.Equal(t, 429, status, "the node's bucket, which invalid bodies are charged to, is empty: %s", body)
		for _, dev := range []string{"a", "b"} {
			status, body = post(t, client, url, "", `{"device":"`+dev+`","seq":1}`)
			assert.Equal(t, 201, status, "device %s behind the node has its own bucket: %s", dev, body)
		}
		status, body = post(t, client, url, "", `{"device":"a","seq":2}`)
		assert.Equal(t, 429, status, "device a is over its rate: %s", body)
	})
}
