package presets

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/middleware"
)

// The end-to-end tests play the edge with a Go reverse proxy that behaves
// as Cloudflare documents (it overwrites CF-Connecting-IP with the address
// that connected to it, appends that address to X-Forwarded-For, and adds
// the shared secret your configuration gives it) and connects from
// 127.0.0.2. Cloudflare's published ranges are public addresses, which a
// test cannot connect from, so the preset is given the edge's loopback
// address as its ranges (Config.Ranges, then a refreshed Source): the rest
// of it — header, topology, identity check, store and refresher — is the
// one production uses.
const (
	edgeFrom    = "127.0.0.2"
	edgeSecret  = "e2e-0rigin-v3rify-s3cr3t"
	forgedIP    = "192.0.2.1"
	secretField = "X-Origin-Verify"
)

// startEdge runs the edge in front of upstream on loopback (IPv4, and IPv6
// when ::1 is there) and returns its addresses.
func startEdge(t *testing.T, upstream string) (v4, v6 string) {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: upstream}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(edgeFrom)}, Timeout: 5 * time.Second}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			peer, _, _ := net.SplitHostPort(pr.In.RemoteAddr)
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"] // Rewrite removed it; the edge appends
			pr.SetXForwarded()
			pr.Out.Header.Set("CF-Connecting-IP", peer)
			pr.Out.Header.Set(secretField, edgeSecret)
		},
		Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
	}
	serve := func(network, addr string) string {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return ""
		}
		srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	v4 = serve("tcp4", "127.0.0.1:0")
	require.NotEmpty(t, v4)
	return v4, serve("tcp6", "[::1]:0")
}

// startApp runs the service: /resolve resolves the client under trust,
// /app does so behind the preset's identity check. Each answers with the
// Result.
func startApp(t *testing.T, p *Preset, trust clientip.Trust) string {
	t.Helper()
	resolve, err := middleware.New(middleware.Config{Trust: trust})
	require.NoError(t, err)
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromContext(r.Context())
		fmt.Fprintf(w, "%s %s secret=%q", res.Client, res.Source, r.Header.Get(secretField))
	})
	mux := http.NewServeMux()
	mux.Handle("/resolve", resolve(echo))
	mux.Handle("/app", p.Handler(resolve(echo)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// get sends a request from the local address from to target with a forged
// CF-Connecting-IP and X-Forwarded-For, and returns the status and body.
func get(t *testing.T, from, target, path string, extra http.Header) (int, string) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	req, err := http.NewRequest("GET", "http://"+target+path, nil)
	require.NoError(t, err)
	req.Header.Set("CF-Connecting-IP", forgedIP)
	req.Header.Set("X-Forwarded-For", forgedIP)
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestNginxIngress: Cloudflare → ingress-nginx → service, with a real
// nginx configured as ingress-nginx renders use-forwarded-headers and
// compute-full-forwarded-for (real_ip from the edge's ranges, and
// X-Forwarded-For extended with $realip_remote_addr, the address nginx
// received the connection from). The preset starts from stale ranges and
// learns the edge's address from a refresh.
func TestNginxIngress(t *testing.T) {
	list := "127.0.0.2/32\n"
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, list) }))
	defer provider.Close()
	src, err := ranges.NewSource(ranges.SourceConfig{Provider: ranges.ProviderCIDRList, Locations: []string{provider.URL + "/ips"}})
	require.NoError(t, err)
	p, err := New(Config{
		Platform:     Cloudflare,
		Topology:     BehindIngress(clientip.MustParsePrefixSet("127.0.0.1/32")), // nginx connects from 127.0.0.1
		Ranges:       clientip.MustParsePrefixSet("127.0.0.3/32"),                // stale
		Source:       src,
		SharedSecret: SharedSecret{Header: secretField, Values: []string{edgeSecret}},
	})
	require.NoError(t, err)
	store, err := p.NewStore(clientip.StoreOptions{})
	require.NoError(t, err)

	app := startApp(t, p, store)
	ports := e2e.StartNginx(t, 1, func(ports []int) string {
		return fmt.Sprintf(`	map $http_x_forwarded_for $full_x_forwarded_for {
		default "$http_x_forwarded_for, $realip_remote_addr";
		''      "$realip_remote_addr";
	}
	server {
		listen 127.0.0.1:%d;
		real_ip_header X-Forwarded-For;
		real_ip_recursive on;
		set_real_ip_from %s;
		location / {
			proxy_set_header X-Forwarded-For $full_x_forwarded_for;
			proxy_set_header X-Real-IP $remote_addr;
			proxy_pass http://%s;
		}
	}`, ports[0], edgeFrom, app)
	})
	ingressAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	edge, edge6 := startEdge(t, ingressAddr)

	code, body := get(t, "127.0.0.8", edge, "/resolve", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, `127.0.0.2 x-forwarded-for secret="e2e-0rigin-v3rify-s3cr3t"`, body,
		"before the refresh the edge is not trusted: nginx's entry for it is the client")

	r, err := p.NewRefresher(store, ranges.RefresherConfig{Client: provider.Client(), AllowPrivate: true})
	require.NoError(t, err)
	require.NoError(t, r.Refresh(context.Background()))

	tests := []struct {
		name, from, target, path string
		extra                    http.Header
		wantCode                 int
		want                     string
	}{
		{name: "client through edge and ingress", from: "127.0.0.8", target: edge, path: "/app",
			wantCode: 200, want: `127.0.0.8 x-forwarded-for secret=""`},
		{name: "resolution alone through edge and ingress", from: "127.0.0.8", target: edge, path: "/resolve",
			wantCode: 200, want: `127.0.0.8 x-forwarded-for secret="e2e-0rigin-v3rify-s3cr3t"`},
		{name: "ingress reached without the edge, forging CF-Connecting-IP", from: "127.0.0.9", target: ingressAddr, path: "/resolve",
			wantCode: 200, want: `127.0.0.9 x-forwarded-for secret=""`},
		{name: "ingress reached without the edge: no identity", from: "127.0.0.9", target: ingressAddr, path: "/app",
			wantCode: 403},
		{name: "ingress reached without the edge: guessed identity", from: "127.0.0.9", target: ingressAddr, path: "/app",
			extra: http.Header{secretField: {"guessed-guessed-guessed"}}, wantCode: 403},
		{name: "service reached without the ingress", from: "127.0.0.10", target: app, path: "/resolve",
			wantCode: 200, want: `127.0.0.10 socket secret=""`},
	}
	tests = append(tests, struct {
		name, from, target, path string
		extra                    http.Header
		wantCode                 int
		want                     string
	}{name: "IPv6 client through edge and ingress", target: edge6, path: "/app", wantCode: 200, want: `::1 x-forwarded-for secret=""`})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.target == "" {
				e2e.Unavailable(t, "no IPv6 loopback address to listen on")
			}
			code, body := get(t, tc.from, tc.target, tc.path, tc.extra)
			require.Equal(t, tc.wantCode, code, body)
			if tc.want != "" {
				assert.Equal(t, tc.want, body)
			}
		})
	}
}

// TestEdgeDirect: the edge connects to the service itself; its header is
// believed from its address only.
func TestEdgeDirect(t *testing.T) {
	p, err := New(Config{
		Platform:     Cloudflare,
		Topology:     Direct(),
		Ranges:       clientip.MustParsePrefixSet(edgeFrom + "/32"),
		SharedSecret: SharedSecret{Header: secretField, Values: []string{edgeSecret}},
	})
	require.NoError(t, err)
	store, err := p.NewStore(clientip.StoreOptions{})
	require.NoError(t, err)
	app := startApp(t, p, store)
	edge, edge6 := startEdge(t, app)

	code, body := get(t, "127.0.0.8", edge, "/app", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, `127.0.0.8 header secret=""`, body)

	code, body = get(t, "127.0.0.9", app, "/resolve", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, `127.0.0.9 socket secret=""`, body, "a direct client's forged header is not read")

	code, _ = get(t, "127.0.0.9", app, "/app", http.Header{secretField: {"guessed-guessed-guessed"}})
	assert.Equal(t, http.StatusForbidden, code)

	t.Run("IPv6 client", func(t *testing.T) {
		if edge6 == "" {
			e2e.Unavailable(t, "no IPv6 loopback address to listen on")
		}
		code, body := get(t, "", edge6, "/app", nil)
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, `::1 header secret=""`, body)
	})
}
