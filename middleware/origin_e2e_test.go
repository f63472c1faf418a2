package middleware

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
)

// originApp is the application of the origin end-to-end tests: the resolve
// middleware trusting the proxies on 127.0.0.1, the origin middleware with
// Apply, and http.CrossOriginProtection, which compares a browser's Origin
// header with the Host the origin middleware applied. It answers with what
// it saw.
func originApp(t *testing.T) *httptest.Server {
	t.Helper()
	resolve, err := New(Config{Trust: clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32"),
		Header:         "X-Forwarded-For",
	})})
	require.NoError(t, err)
	origin, err := NewOrigin(OriginConfig{Apply: true, Reader: clientip.MustNewOriginReader(clientip.OriginConfig{
		Proto: "X-Forwarded-Proto", Host: "X-Forwarded-Host", Port: "X-Forwarded-Port", Prefix: "X-Forwarded-Prefix",
		AllowedHosts: []string{"example.com"},
	})})
	require.NoError(t, err)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromContext(r.Context())
		o, _ := clientip.OriginFromContext(r.Context())
		fmt.Fprintf(w, "%s %s prefix %q path %s url %s://%s; proto %q", res.Client, o, o.Prefix, r.URL.Path, r.URL.Scheme, r.Host,
			strings.Join(r.Header["X-Forwarded-Proto"], " | "))
	})
	srv := httptest.NewServer(resolve(origin(http.NewCrossOriginProtection().Handler(app))))
	t.Cleanup(srv.Close)
	return srv
}

// originRequest is one request of a client on 127.0.0.7 (outside the
// trusted set), with forged origin headers unless it sets its own.
type originRequest struct {
	name   string
	method string // GET when empty
	url    string
	host   string            // the Host header; example.com when empty
	header map[string]string // added to the forged ones
	want   string            // the body, or the status line for a refusal
}

var forgedOrigin = map[string]string{
	"X-Forwarded-For":    "6.6.6.6",
	"X-Forwarded-Proto":  "http",
	"X-Forwarded-Host":   "evil.example",
	"X-Forwarded-Port":   "1",
	"X-Forwarded-Prefix": "//evil.example",
}

func runOriginRequests(t *testing.T, cert e2e.ServerCert, tests []originRequest) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.7")}}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: d.DialContext, DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: cert.Pool},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			req, err := http.NewRequest(method, tc.url, nil)
			require.NoError(t, err)
			req.Host = "example.com"
			if tc.host != "" {
				req.Host = tc.host
			}
			for k, v := range forgedOrigin {
				req.Header.Set(k, v)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got := string(body)
			if resp.StatusCode != http.StatusOK {
				got = resp.Status + ": " + strings.TrimSpace(got)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestOriginNginx puts a real nginx in front of the origin middleware, with
// the configuration that sets the origin headers on every request (and
// clears X-Forwarded-Prefix where it has none to report), over http and
// https, and checks that what a client forged never becomes its origin.
func TestOriginNginx(t *testing.T) {
	cert := e2e.NewServerCert(t, "example.com", "127.0.0.1")
	app := originApp(t)
	const originHeaders = `
		proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
		proxy_set_header X-Forwarded-Proto $scheme;
		proxy_set_header X-Forwarded-Host $host;
		proxy_set_header X-Forwarded-Port $server_port;`
	ports := e2e.StartNginx(t, 2, func(p []int) string {
		return fmt.Sprintf(`	server {
		listen 127.0.0.1:%[1]d;
		listen 127.0.0.1:%[2]d ssl;
		ssl_certificate %[3]s;
		ssl_certificate_key %[4]s;
		location / {%[6]s
			proxy_set_header X-Forwarded-Prefix "";
			proxy_pass http://%[5]s;
		}
		location /app/ {%[6]s
			proxy_set_header X-Forwarded-Prefix /app;
			proxy_pass http://%[5]s/;
		}
	}`, p[0], p[1], cert.Cert, cert.Key, app.Listener.Addr(), originHeaders)
	})
	plain, secure := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	runOriginRequests(t, cert, []originRequest{
		{name: "https through nginx: the scheme, host and port nginx saw; every forged value overwritten", url: "https://" + secure + "/login",
			want: fmt.Sprintf(`127.0.0.7 https://example.com:%d prefix "" path /login url https://example.com:%[1]d; proto "https"`, ports[1])},
		{name: "http through nginx", url: "http://" + plain + "/login",
			want: fmt.Sprintf(`127.0.0.7 http://example.com:%d prefix "" path /login url http://example.com:%[1]d; proto "http"`, ports[0])},
		{name: "the prefix nginx removed", url: "https://" + secure + "/app/login",
			want: fmt.Sprintf(`127.0.0.7 https://example.com:%d prefix "/app" path /login url https://example.com:%[1]d; proto "https"`, ports[1])},
		{name: "spoof: a client on the app directly keeps its own origin, whatever it forged", url: app.URL + "/login",
			want: `127.0.0.7 http://example.com prefix "" path /login url http://example.com; proto "http"`},
		{name: "a Host nginx passes on but the service does not answer to: 400", url: "https://" + secure + "/", host: "evil.example",
			want: "400 Bad Request: cannot determine the request's origin: host not allowed in X-Forwarded-Host"},
		{name: "CSRF: a same-origin POST passes http.CrossOriginProtection through nginx", method: http.MethodPost, url: "https://" + secure + "/form",
			header: map[string]string{"Origin": fmt.Sprintf("https://example.com:%d", ports[1])},
			want:   fmt.Sprintf(`127.0.0.7 https://example.com:%d prefix "" path /form url https://example.com:%[1]d; proto "https"`, ports[1])},
		{name: "CSRF: a cross-origin POST is refused", method: http.MethodPost, url: "https://" + secure + "/form",
			header: map[string]string{"Origin": "https://evil.example"},
			want:   "403 Forbidden: cross-origin request detected, and/or browser is out of date: Sec-Fetch-Site is missing, and Origin does not match Host"},
	})
}

// TestOriginHAProxy puts a real HAProxy in front of the origin middleware:
// a frontend that sets the origin headers (http-request set-header), one
// that appends them (add-header, so a client's forged entries stay at the
// left of each list), and an edge that sets them in front of an nginx that
// passes them on and appends to X-Forwarded-For (two hops: the edge's value
// is the one value, k = 1).
func TestOriginHAProxy(t *testing.T) {
	cert := e2e.NewServerCert(t, "example.com", "127.0.0.1")
	app := originApp(t)
	inner := e2e.StartNginx(t, 1, func(p []int) string {
		return fmt.Sprintf(`	server {
		listen 127.0.0.1:%d;
		location / {
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_pass http://%s;
		}
	}`, p[0], app.Listener.Addr())
	})
	ports := e2e.StartHAProxy(t, 4, func(p []int) string {
		return fmt.Sprintf(`defaults
    mode http
    timeout connect 5s
    timeout client 10s
    timeout server 10s
frontend set
    bind 127.0.0.1:%[1]d
    bind 127.0.0.1:%[2]d ssl crt %[5]s
    option forwardfor
    http-request set-header X-Forwarded-Proto https if { ssl_fc }
    http-request set-header X-Forwarded-Proto http if !{ ssl_fc }
    http-request set-header X-Forwarded-Host %%[req.hdr(host)]
    http-request set-header X-Forwarded-Port %%[dst_port]
    http-request del-header X-Forwarded-Prefix
    default_backend app
frontend append
    bind 127.0.0.1:%[3]d ssl crt %[5]s
    option forwardfor
    http-request add-header X-Forwarded-Proto https
    http-request add-header X-Forwarded-Host %%[req.hdr(host)]
    http-request add-header X-Forwarded-Port %%[dst_port]
    http-request del-header X-Forwarded-Prefix
    default_backend app
frontend edge
    bind 127.0.0.1:%[4]d ssl crt %[5]s
    option forwardfor
    http-request set-header X-Forwarded-Proto https
    http-request set-header X-Forwarded-Host %%[req.hdr(host)]
    http-request set-header X-Forwarded-Port %%[dst_port]
    http-request del-header X-Forwarded-Prefix
    default_backend inner
backend app
    server app %[6]s
backend inner
    server inner 127.0.0.1:%[7]d
`, p[0], p[1], p[2], p[3], cert.Both, app.Listener.Addr(), inner[0])
	})
	at := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	// raw is the X-Forwarded-Proto lines the application received.
	want := func(scheme string, i int, path, raw string) string {
		return fmt.Sprintf(`127.0.0.7 %[1]s://example.com:%[2]d prefix "" path %[3]s url %[1]s://example.com:%[2]d; proto %[4]q`, scheme, ports[i], path, raw)
	}
	runOriginRequests(t, cert, []originRequest{
		{name: "set-header over https: HAProxy's values, the forged ones replaced", url: "https://" + at(1) + "/login", want: want("https", 1, "/login", "https")},
		{name: "set-header over http", url: "http://" + at(0) + "/login", want: want("http", 0, "/login", "http")},
		{name: "spoof: add-header appends; the client's forged entries at the left are never read", url: "https://" + at(2) + "/login",
			want: want("https", 2, "/login", "http | https")},
		{name: "two hops, HAProxy sets and nginx passes on: the edge's one value", url: "https://" + at(3) + "/login", want: want("https", 3, "/login", "https")},
		{name: "a Host the service does not answer to: 400", url: "https://" + at(1) + "/", host: "evil.example",
			want: "400 Bad Request: cannot determine the request's origin: host not allowed in X-Forwarded-Host"},
	})
}
