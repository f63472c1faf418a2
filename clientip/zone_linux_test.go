package clientip

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/internal/e2e"
)

// TestZoneReverseProxyLinkLocal runs a chain of two real
// httputil.ReverseProxy instances over link-local IPv6, in network
// namespaces of its own, and resolves what they wrote:
//
//	client (ns cl) ──link 1── proxy A (ns pa) ──link 2── proxy B + backend (ns pb)
//	fe80::c, 2001:db8:1::c    fe80::a1, 2001:db8:1::a | fe80::a2     fe80::b, 127.0.0.1
//
// Each proxy appends the host part of its RemoteAddr to X-Forwarded-For, the
// zone of a link-local peer included ("fe80::c%za0"). The backend trusts
// 127.0.0.1 and fe80::a2/128, so it must match proxy A's zoned entry without
// its zone and name the client without one.
func TestZoneReverseProxyLinkLocal(t *testing.T) {
	ns := func(role string) e2e.Netns { return e2e.NewNetns(t, fmt.Sprintf("sipzone%d-%s", os.Getpid(), role)) }
	cl, pa, pb := ns("cl"), ns("pa"), ns("pb")
	cl.Veth(t, "zc0", pa, "za0")
	pa.Veth(t, "za1", pb, "zb0")
	for _, a := range []struct {
		ns        e2e.Netns
		dev, cidr string
	}{
		{cl, "zc0", "fe80::c/64"}, {cl, "zc0", "2001:db8:1::c/64"},
		{pa, "za0", "fe80::a1/64"}, {pa, "za0", "2001:db8:1::a/64"}, {pa, "za1", "fe80::a2/64"},
		{pb, "zb0", "fe80::b/64"},
	} {
		a.ns.AddAddr(t, a.cidr, a.dev)
	}

	r := MustNew(Config{TrustedProxies: MustParsePrefixSet("127.0.0.1/32, fe80::a2/128"), Header: "X-Forwarded-For"})
	type seen struct {
		xff string
		res Result
		err error
	}
	got := make(chan seen, 1)
	backend := serveIn(t, pb, "tcp4", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		res, err := r.ResolveRequest(req)
		got <- seen{strings.Join(req.Header["X-Forwarded-For"], " | "), res, err}
	}))
	proxyB := serveIn(t, pb, "tcp6", "[::]:0", appendingProxy(pb, &url.URL{Scheme: "http", Host: backend.String()}))
	proxyA := serveIn(t, pa, "tcp6", "[::]:0", appendingProxy(pa, &url.URL{
		Scheme: "http", Host: net.JoinHostPort("fe80::b%za1", fmt.Sprint(proxyB.(*net.TCPAddr).Port)),
	}))
	portA := fmt.Sprint(proxyA.(*net.TCPAddr).Port)
	client := &http.Client{Transport: transportIn(cl), Timeout: 10 * time.Second}

	// The zone is the name of the interface the peer came in on. Go looks
	// names up in a process-wide cache filled from whichever namespace asked
	// last, so in one process holding three namespaces a zone may name
	// another namespace's interface; the resolver drops it either way.
	const zone = `z[abc][01]`
	tests := []struct {
		name, target string
		xff          string // a regular expression
		client, via  string
		hop          int
	}{
		{name: "link-local client, link-local proxy hop", target: net.JoinHostPort("fe80::a1%zc0", portA),
			xff: `6\.6\.6\.6, fe80::c%` + zone + `, fe80::a2%` + zone, client: "fe80::c", via: "fe80::a2", hop: 2},
		{name: "documentation-address client, link-local proxy hop", target: net.JoinHostPort("2001:db8:1::a", portA),
			xff: `6\.6\.6\.6, 2001:db8:1::c, fe80::a2%` + zone, client: "2001:db8:1::c", via: "fe80::a2", hop: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			require.NoError(t, err)
			req.URL.Host = tc.target                     // a zone in a URL string would need RFC 6874's %25
			req.Header.Set("X-Forwarded-For", "6.6.6.6") // forged by the client, never read
			resp, err := client.Do(req)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			s := <-got
			assert.Regexp(t, "^"+tc.xff+"$", s.xff, "what the two ReverseProxy instances wrote")
			require.NoError(t, s.err, "result %v", s.res)
			assert.Equal(t, addr(tc.client), s.res.Client, "client, without a zone")
			assert.Empty(t, s.res.Client.Zone())
			assert.Equal(t, addr(tc.via), s.res.Via, "the zoned entry matched the trusted set without its zone")
			assert.Equal(t, tc.hop, s.res.Hop)
		})
	}
}

// appendingProxy is a ReverseProxy that forwards to target and appends its
// peer to X-Forwarded-For, as httputil documents for Rewrite, dialling from
// namespace ns.
func appendingProxy(ns e2e.Netns, target *url.URL) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
			pr.SetXForwarded()
		},
		Transport: transportIn(ns),
	}
}

// transportIn is an HTTP transport whose connections are dialled from ns.
func transportIn(ns e2e.Netns) *http.Transport {
	return &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, address string) (c net.Conn, err error) {
			err = ns.Do(func() error {
				c, err = new(net.Dialer).DialContext(ctx, network, address)
				return err
			})
			return c, err
		},
	}
}

// serveIn serves h on a listener opened in ns until the test ends, and
// returns the listener's address.
func serveIn(t *testing.T, ns e2e.Netns, network, address string, h http.Handler) net.Addr {
	t.Helper()
	var ln net.Listener
	require.NoError(t, ns.Do(func() (err error) {
		ln, err = net.Listen(network, address)
		return err
	}))
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr()
}
