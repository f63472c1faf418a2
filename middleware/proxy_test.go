package middleware

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

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
	mw, err := New(Config{Resolver: r})
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan clientip.Result, 1)
	srv := httptest.NewUnstartedServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromContext(r.Context())
		results <- res
		if r.TLS == nil {
			t.Error("request not over TLS")
		}
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
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			res := <-results
			if res.Client != addr(tc.want) || res.Source != tc.from || res.Hop != tc.hop {
				t.Errorf("result = %v, want %s from %v hop %d", res, tc.want, tc.from, tc.hop)
			}
			if res.Proxy.String() != tc.src || res.Peer.Addr() != addr("127.0.0.1") {
				t.Errorf("layers: peer %v proxy %v, want the balancer and %s", res.Peer, res.Proxy, tc.src)
			}
		})
	}
}
