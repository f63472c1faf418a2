package clientip

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/internal/e2e"
)

// TestForwardChain runs a client through a real nginx and two real
// httputil.ReverseProxy instances whose Rewrite calls Forwarder.Rewrite,
// every hop on its own loopback address:
//
//	client ──► nginx ──► proxy A ──► proxy B ──► application
//	127.0.0.7  127.0.0.4  127.0.0.2   127.0.0.3   (the address each dials from)
//
// nginx appends to X-Forwarded-For and sets X-Forwarded-Proto, -Host and
// -Port. Proxy A trusts nginx and reads X-Forwarded-For; proxy B trusts A
// and nginx and reads the Forwarded header A wrote; the application trusts
// all three and reads X-Forwarded-For and the X-Forwarded origin headers B
// wrote. Every client sends forged forwarding headers; the application must
// receive exactly the verified chain and origin, and nothing else.
func TestForwardChain(t *testing.T) {
	cert := e2e.NewServerCert(t, "example.com", "127.0.0.1")
	got := make(chan string, 1)
	appTrust := MustNew(Config{TrustedProxies: MustParsePrefixSet("127.0.0.2/32, 127.0.0.3/32, 127.0.0.4/32"), Header: "X-Forwarded-For"})
	appOrigin := MustNewOriginReader(OriginConfig{Proto: "X-Forwarded-Proto", Host: "X-Forwarded-Host", Port: "X-Forwarded-Port"})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lines []string
		for k, v := range r.Header {
			if documentedIsForwarding(k) {
				lines = append(lines, k+": "+strings.Join(v, " | "))
			}
		}
		slices.Sort(lines)
		res, err := appTrust.ResolveRequest(r)
		if err != nil {
			lines = append(lines, "unresolved: "+ReasonOf(err).String())
		} else {
			o, err := appOrigin.ReadRequest(r, res)
			lines = append(lines, fmt.Sprintf("client %s hop %d origin %s %v", res.Client, res.Hop, o, err))
		}
		got <- strings.Join(lines, "\n")
	}))
	t.Cleanup(app.Close)

	proxyB := forwardingProxy(t, "127.0.0.3", app.URL, ForwardConfig{
		Trust:         MustNew(Config{TrustedProxies: MustParsePrefixSet("127.0.0.2/32, 127.0.0.4/32"), Header: "Forwarded"}),
		XForwardedFor: true, Forwarded: true, XForwardedOrigin: true,
		Origin: MustNewOriginReader(OriginConfig{Proto: "Forwarded", Host: "Forwarded", AllowedHosts: []string{"example.com"}}),
	})
	proxyA := forwardingProxy(t, "127.0.0.2", proxyB.URL, ForwardConfig{
		Trust:         MustNew(Config{TrustedProxies: MustParsePrefixSet("127.0.0.4/32"), Header: "X-Forwarded-For"}),
		XForwardedFor: true, Forwarded: true, XForwardedOrigin: true,
		Origin: MustNewOriginReader(OriginConfig{Proto: "X-Forwarded-Proto", Host: "X-Forwarded-Host", Port: "X-Forwarded-Port", AllowedHosts: []string{"example.com"}}),
	})
	ports := e2e.StartNginx(t, 1, func(p []int) string {
		return fmt.Sprintf(`	server {
		listen 127.0.0.1:%d ssl;
		ssl_certificate %s;
		ssl_certificate_key %s;
		location / {
			proxy_bind 127.0.0.4;
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_set_header X-Forwarded-Proto $scheme;
			proxy_set_header X-Forwarded-Host $host;
			proxy_set_header X-Forwarded-Port $server_port;
			proxy_pass %s;
		}
	}`, p[0], cert.Cert, cert.Key, proxyA.URL)
	})
	np := ports[0]
	originNP := fmt.Sprintf(`proto=https;host="example.com:%d"`, np)

	forged := []string{
		"X-Forwarded-For", "6.6.6.6", "Forwarded", `for=6.6.6.6;proto=https;host="evil.example"`, "X-Real-IP", "6.6.6.6",
		"True-Client-IP", "6.6.6.6", "X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https", "X-Forwarded-Prefix", "/evil",
		"X-Original-URL", "/admin", "X-Envoy-Internal", "true", "X_Forwarded_For", "6.6.6.6", "X_Real_IP", "6.6.6.6",
	}
	tests := []struct {
		name, from, url string
		host            string   // the request's Host; "" is example.com
		header          []string // added to the forged headers
		want            []string
	}{
		{name: "through nginx and both proxies: the verified chain and origin, nothing the client wrote", from: "127.0.0.7",
			url: fmt.Sprintf("https://127.0.0.1:%d/", np),
			want: []string{
				fmt.Sprintf("Forwarded: for=127.0.0.7;%s, for=127.0.0.4, for=127.0.0.2;by=127.0.0.1", originNP),
				"X-Forwarded-For: 127.0.0.7, 127.0.0.4, 127.0.0.2",
				fmt.Sprintf("X-Forwarded-Host: example.com:%d", np),
				fmt.Sprintf("X-Forwarded-Port: %d", np),
				"X-Forwarded-Proto: https",
				fmt.Sprintf("client 127.0.0.7 hop 3 origin https://example.com:%d <nil>", np),
			}},
		{name: "a client straight to proxy A: its socket address and its own origin; a Connection header cannot strip what A writes",
			from: "127.0.0.7", url: proxyA.URL + "/", header: []string{"Connection", "X-Forwarded-Host, X_Forwarded_For"},
			want: []string{
				"Forwarded: for=127.0.0.7;proto=http;host=example.com, for=127.0.0.2;by=127.0.0.1",
				"X-Forwarded-For: 127.0.0.7, 127.0.0.2",
				"X-Forwarded-Host: example.com",
				"X-Forwarded-Port: 80",
				"X-Forwarded-Proto: http",
				"client 127.0.0.7 hop 2 origin http://example.com <nil>",
			}},
		// Request laundering: a request A cannot vouch for must not reach
		// the application as a request every hop is trusted on
		// (all_trusted, which Rule.AdmitInternal admits as an internal
		// caller's): A and B mark it as forwarded for an unknown client.
		{name: "spoof: a client on nginx's own address with a garbage chain: A and B mark the client unknown, the application refuses it",
			from: "127.0.0.4", url: proxyA.URL + "/", header: []string{"X-Forwarded-For", "garbage"},
			want: []string{"Forwarded: for=unknown;by=127.0.0.1", "X-Forwarded-For: unknown", "unresolved: malformed"}},
		{name: "spoof: a Host A does not allow, through nginx: A and B mark the client unknown, the application refuses it",
			from: "127.0.0.7", url: fmt.Sprintf("https://127.0.0.1:%d/", np), host: "evil.example",
			want: []string{"Forwarded: for=unknown;by=127.0.0.1", "X-Forwarded-For: unknown", "unresolved: malformed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(tc.from)}}
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				DialContext: d.DialContext, DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: cert.Pool},
			}}
			req, err := http.NewRequest(http.MethodGet, tc.url, nil)
			require.NoError(t, err)
			req.Host = "example.com"
			if tc.host != "" {
				req.Host = tc.host
			}
			h := append(slices.Clone(forged), tc.header...)
			for i := 0; i+1 < len(h); i += 2 {
				req.Header.Set(h[i], h[i+1])
			}
			resp, err := client.Do(req)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, strings.Join(tc.want, "\n"), <-got)
		})
	}
}

// forwardingProxy serves an httputil.ReverseProxy to target whose Rewrite
// calls Forwarder.Rewrite, dialling from the loopback address from.
func forwardingProxy(t *testing.T, from, target string, cfg ForwardConfig) *httptest.Server {
	t.Helper()
	fw, err := NewForwarder(cfg)
	require.NoError(t, err)
	u, err := url.Parse(target)
	require.NoError(t, err)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			fw.Rewrite(pr)
		},
		Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
	})
	t.Cleanup(srv.Close)
	return srv
}
