package middleware

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// TestResolveProxyProtocolTLS serves the middleware over TLS from a PROXY
// listener with proxyproto.ConnContext: the PROXY source reaches the resolver
// through the connection, the load balancer stays the socket peer, and a
// trusted PROXY source lets the walk go on into X-Forwarded-For.
func TestResolveProxyProtocolTLS(t *testing.T) {
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("loopback, 10.0.0.0/8"),
		Header:         "X-Forwarded-For",
	})
	mw, err := New(Config{Trust: r})
	require.NoError(t, err)
	results := make(chan clientip.Result, 1)
	srv := httptest.NewUnstartedServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromContext(r.Context())
		results <- res
		assert.NotNil(t, r.TLS, "request not over TLS")
	})))
	srv.Listener.Close()
	srv.Listener = ppListener(t)
	srv.Config.ConnContext = proxyproto.ConnContext
	srv.StartTLS()
	defer srv.Close()

	tests := []struct {
		name  string
		src   string // PROXY source
		xff   string
		want  string
		from  clientip.Source
		hop   int
		proxy string
	}{
		{name: "PROXY client's forged XFF ignored", src: "203.0.113.7:5555", xff: "6.6.6.6",
			want: "203.0.113.7", from: clientip.SourceProxyProtocol, hop: 1},
		{name: "trusted PROXY source hands on to XFF", src: "10.0.0.5:5555", xff: "6.6.6.6, 198.51.100.7",
			want: "198.51.100.7", from: clientip.SourceXForwardedFor, hop: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := srv.Client().Transport.(*http.Transport).Clone()
			tr.DisableKeepAlives = true
			tr.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
				return proxyproto.DialContext(ctx, nil, network, address, proxyHeader(tc.src))
			}
			req, _ := http.NewRequest("GET", srv.URL, nil)
			req.Header.Set("X-Forwarded-For", tc.xff)
			resp, err := (&http.Client{Transport: tr}).Do(req)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			res := <-results
			assert.Equal(t, addr(tc.want), res.Client, "client")
			assert.Equal(t, tc.from, res.Source, "source")
			assert.Equal(t, tc.hop, res.Hop, "hop")
			assert.Equal(t, tc.src, res.Proxy.String(), "the PROXY layer")
			assert.Equal(t, addr("127.0.0.1"), res.Peer.Addr(), "the balancer is the socket peer")
		})
	}
}
