package middleware

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/proxyproto"
)

// haproxyAddr is the source address HAProxy uses towards the application,
// apart from every client's.
const haproxyAddr = "127.0.0.200"

// TestHAProxyConnContext serves HTTP from a proxyproto.Listener behind the
// real HAProxy sending PROXY v2 (mode tcp), with one ConnContext and a policy
// that resolves on demand: the client is the PROXY source, whatever
// X-Forwarded-For it forges; the policy admits or refuses it by its address;
// every request of a kept-alive connection is resolved from the node its
// connection stored once.
func TestHAProxyConnContext(t *testing.T) {
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(haproxyAddr), Header: "X-Forwarded-For"})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	pl, err := proxyproto.NewListener(inner, proxyproto.Config{Trust: trust, ReadHeaderTimeout: 3 * time.Second})
	require.NoError(t, err)
	policy, err := NewPolicy(PolicyConfig{
		Targets: TargetPatterns,
		Rules:   []Rule{{Name: "admin", Target: "/admin/", Allow: clientip.MustParsePrefixSet("127.0.0.16/28")}},
		Default: Rule{Name: "public", Allow: clientip.Loopback()},
	})
	require.NoError(t, err)
	var conns atomic.Int32
	srv := &http.Server{
		Handler: policy.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res, err := clientip.FromRequest(r)
			require.NoError(t, err)
			fmt.Fprintf(w, "%s from %s, peer %s", res.Client, res.Source, res.Peer.Addr())
		})),
		ConnContext: ConnContext(trust),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
		ReadHeaderTimeout: 5 * time.Second,
	}
	serve(t, srv, pl)
	ports := e2e.StartHAProxy(t, 1, func(p []int) string {
		return fmt.Sprintf(`
global
    maxconn 64

defaults
    mode tcp
    timeout connect 2s
    timeout client  10s
    timeout server  10s

frontend fe
    bind 127.0.0.1:%d
    default_backend be

backend be
    server app %s send-proxy-v2 source %s
`, p[0], pl.Addr(), haproxyAddr)
	})
	frontend := fmt.Sprintf("http://127.0.0.1:%d", ports[0])

	clientFrom := func(src string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	}
	get := func(c *http.Client, path, xff string) (int, string) {
		req, err := http.NewRequestWithContext(context.Background(), "GET", frontend+path, nil)
		require.NoError(t, err)
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	tests := []struct {
		name, src, path string
		wantCode        int
		wantBody        string
	}{
		{"admin from an allowed client, forged XFF ignored", "127.0.0.21", "/admin/x", 200, "127.0.0.21 from proxy-protocol, peer " + haproxyAddr},
		{"admin from another client", "127.0.0.41", "/admin/x", 403, "forbidden: the client address is not in an allowed source range\n"},
		{"public from another client", "127.0.0.41", "/x", 200, "127.0.0.41 from proxy-protocol, peer " + haproxyAddr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := clientFrom(tc.src)
			defer c.CloseIdleConnections()
			before := conns.Load()
			for range 3 { // one kept-alive connection: its node serves every request
				code, body := get(c, tc.path, "198.51.100.7")
				assert.Equal(t, tc.wantCode, code)
				assert.Equal(t, tc.wantBody, body)
			}
			assert.Equal(t, before+1, conns.Load(), "HAProxy opened more than one connection for one client connection")
		})
	}
}
