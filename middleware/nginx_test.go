package middleware

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
)

// TestNginx puts a real nginx in front of the middleware on loopback, with
// the configuration most deployments use (proxy_add_x_forwarded_for), and
// checks that a client's forged X-Forwarded-For does not name the client,
// neither through nginx nor when the client reaches the server directly.
func TestNginx(t *testing.T) {
	// The server trusts only nginx's address.
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32"),
		Header:         "X-Forwarded-For",
	})
	mw, err := New(Config{Trust: r})
	require.NoError(t, err)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromContext(r.Context())
		fmt.Fprintf(w, "%s %s hop %d via %v; xff %q", res.Client, res.Source, res.Hop, res.Via, r.Header.Get("X-Forwarded-For"))
	})))
	defer srv.Close()

	front := startNginx(t, srv.Listener.Addr().String())

	tests := []struct {
		name   string
		from   string // client's source address
		target string
		want   string
	}{
		{name: "through nginx", from: "127.0.0.7", target: front,
			want: `127.0.0.7 x-forwarded-for hop 1 via 127.0.0.1; xff "6.6.6.6, 127.0.0.7"`},
		{name: "direct", from: "127.0.0.8", target: srv.Listener.Addr().String(),
			want: `127.0.0.8 socket hop 0 via invalid IP; xff "6.6.6.6"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(tc.from)}}
			c := &http.Client{
				Timeout:   10 * time.Second,
				Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
			}
			req, _ := http.NewRequest("GET", "http://"+tc.target+"/", nil)
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			resp, err := c.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, tc.want, string(body))
		})
	}
}

// startNginx runs nginx as a reverse proxy to upstream that appends to
// X-Forwarded-For, as most deployments configure it, and returns its
// address. It is stopped when the test ends.
func startNginx(t *testing.T, upstream string) string {
	t.Helper()
	ports := e2e.StartNginx(t, 1, func(p []int) string {
		return fmt.Sprintf(`	server {
		listen 127.0.0.1:%d;
		location / {
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_pass http://%s;
		}
	}`, p[0], upstream)
	})
	return fmt.Sprintf("127.0.0.1:%d", ports[0])
}
