package middleware

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProxyHeaderWithoutClient: a PROXY header that names no client — v1
// "PROXY UNKNOWN", which HAProxy (send-proxy) and nginx (proxy_protocol)
// send for connections they relay from clients on other address families,
// such as Unix sockets, and v2 LOCAL, the load
// balancer's own connection (spec 2.1, 2.2) — must not let the walk step
// over the trusted load balancer into a forwarding header: a layer 4 load
// balancer writes none, so the header is the client's own. A forged
// "203.0.113.66, <trusted proxy>" would otherwise make 203.0.113.66 the
// client (the trusted entry stepped over, the forged one taken).
func TestProxyHeaderWithoutClient(t *testing.T) {
	// The load balancer (127.0.0.1) and an edge proxy range in front of it
	// are trusted; X-Forwarded-For is read behind them.
	store := mustStore(t, clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1, 198.51.100.0/24"), Header: "X-Forwarded-For"})
	mw, err := New(Config{Trust: store})
	require.NoError(t, err)
	// A policy that admits internal callers from the load balancer, as its
	// health checks need (middleware's doc).
	policy, err := NewPolicy(PolicyConfig{Trust: store, Default: Rule{Allow: clientip.MustParsePrefixSet("127.0.0.1"), AdmitInternal: true}})
	require.NoError(t, err)
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromContext(r.Context())
		io.WriteString(w, "client "+res.Client.String()+" via "+res.Via.String())
	})
	for _, version := range []uint8{1, 2} {
		for _, h := range []struct {
			name   string
			h      http.Handler
			status int
		}{{"middleware", mw(echo), http.StatusBadRequest}, {"policy admitting internal callers", policy.Handler(echo), http.StatusOK}} {
			t.Run(map[uint8]string{1: "v1 UNKNOWN", 2: "v2 LOCAL"}[version]+", "+h.name, func(t *testing.T) {
				pl, err := proxyproto.NewListener(loopback(t), proxyproto.Config{Trust: store})
				require.NoError(t, err)
				srv := &http.Server{ConnContext: proxyproto.ConnContext, Handler: h.h}
				go srv.Serve(pl)
				t.Cleanup(func() { srv.Close() })

				d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
				c, err := proxyproto.DialContext(t.Context(), d, "tcp", pl.Addr().String(), proxyproto.Header{Version: version, Command: proxyproto.CommandLocal})
				require.NoError(t, err)
				t.Cleanup(func() { c.Close() })
				_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.66, 198.51.100.7\r\n\r\n")
				require.NoError(t, err)
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				require.NoError(t, err)
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.NotContains(t, string(body), "203.0.113.66", "the forged X-Forwarded-For entry was taken for the client")
				require.Equal(t, h.status, resp.StatusCode, "%s", body)
				if h.status == http.StatusOK {
					assert.Contains(t, string(body), "client invalid IP", "an internal caller, judged as the load balancer: no client")
				}
			})
		}
	}
}
