// Package compare runs the same requests through sourceip's clientip and
// through the client-IP extractors of gin, echo, chi and realclientip-go, each
// configured as securely as it allows, and benchmarks them side by side; it
// also compares sourceip's request middlewares with chi's ClientIPFromXFF and
// ClientIPFromHeader (middleware_test.go). clientip is measured twice: with
// ResolveRequest, which parses r.RemoteAddr, and with FromRequest on a
// request whose connection middleware.ConnContext prepared, as a server
// serves it (conn_test.go). It is its own module so that none of these frameworks
// enters the library's dependency graph.
package compare

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/labstack/echo/v4"
	"github.com/realclientip/realclientip-go"
	"github.com/sourceip/sourceip/clientip"
	"github.com/stretchr/testify/assert"
)

// The trusted proxies, as CIDR strings every implementation accepts.
var trusted = []string{"10.0.0.0/8", "fd00::/8"}

type scenario struct {
	name   string
	remote string          // r.RemoteAddr
	header string          // the header to read
	values []string        // its lines
	want   string          // the client every correct implementation names
	impls  map[string]bool // implementations that support the scenario (nil: all)
}

func scenarios() []scenario {
	xff20 := []string{"198.51.100.7"}
	for i := 1; i < 20; i++ {
		xff20 = append(xff20, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))
	}
	only := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	return []scenario{
		{name: "direct", remote: "203.0.113.9:51234", header: "X-Forwarded-For", values: []string{"127.0.0.1"}, want: "203.0.113.9"},
		{name: "xff3", remote: "10.0.0.1:40000", header: "X-Forwarded-For", values: []string{"198.51.100.7, 10.0.0.2, 10.0.0.3"}, want: "198.51.100.7"},
		{name: "xff20", remote: "10.0.0.1:40000", header: "X-Forwarded-For", values: []string{strings.Join(xff20, ", ")}, want: "198.51.100.7"},
		{name: "xff3v6", remote: "[fd00::1]:40000", header: "X-Forwarded-For", values: []string{"2001:db8:85a3::8a2e:370:7334, fd00::2, fd00::3"}, want: "2001:db8:85a3::8a2e:370:7334"},
		{name: "forwarded3", remote: "10.0.0.1:40000", header: "Forwarded", values: []string{`for=198.51.100.7;proto=https, for=10.0.0.2, for="[fd00::3]:8080"`},
			want: "198.51.100.7", impls: only("clientip", "realclientip")},
		{name: "single", remote: "10.0.0.1:40000", header: "X-Real-IP", values: []string{"198.51.100.7"}, want: "198.51.100.7"},
	}
}

func (s scenario) request() *http.Request {
	r := httptest.NewRequest("GET", "http://example/", nil)
	r.RemoteAddr = s.remote
	r.Header[http.CanonicalHeaderKey(s.header)] = s.values
	return r
}

// An extractor returns the client address of one request in its
// implementation's own type: a netip.Addr (clientip, chi) or a string (the
// others). Converting to a common type would charge some of them an
// allocation they do not make.
type extractor func(*http.Request) (netip.Addr, string)

func (ex extractor) answer(req *http.Request) string {
	a, s := ex(req)
	if a.IsValid() {
		return a.String()
	}
	return s
}

// str adapts an extractor that returns a string.
func str(f func(*http.Request) string) extractor {
	return func(req *http.Request) (netip.Addr, string) { return netip.Addr{}, f(req) }
}

func mustCIDRs() []*net.IPNet {
	var out []*net.IPNet
	for _, c := range trusted {
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			panic(err)
		}
		out = append(out, n)
	}
	return out
}

// resolverFor returns sourceip's resolver for a scenario: the trusted set and
// the one header.
func resolverFor(s scenario) *clientip.Resolver {
	return clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet(strings.Join(trusted, ",")), Header: s.header})
}

// implementations returns the extractors for a scenario, each configured as
// securely as its API allows, and the request each is given: every request
// carries the context a real net/http server gives it (a context lookup that
// misses walks all of its nodes), with sourceip's connection node for
// clientip-conn, whose server has middleware.ConnContext, and without it for
// the others.
func implementations(tb testing.TB, s scenario) (map[string]extractor, map[string]*http.Request) {
	out := map[string]extractor{}
	reqs := map[string]*http.Request{}

	// clientip: the trusted set and the one header. ResolveRequest parses
	// the peer from r.RemoteAddr on each request; FromRequest reads the
	// connection's node that middleware.ConnContext stored once.
	r := resolverFor(s)
	out["clientip"] = func(req *http.Request) (netip.Addr, string) {
		res, err := r.ResolveRequest(req)
		if err != nil {
			return netip.Addr{}, ""
		}
		return res.Client, ""
	}
	out["clientip-conn"] = func(req *http.Request) (netip.Addr, string) {
		res, err := clientip.FromRequest(req)
		if err != nil {
			return netip.Addr{}, ""
		}
		return res.Client, ""
	}
	reqs["clientip-conn"] = s.connRequest(tb, r)

	// gin: trusted proxies set (the default trusts everyone), only the one header.
	gin.SetMode(gin.ReleaseMode)
	if s.header != "Forwarded" {
		c, e := gin.CreateTestContext(httptest.NewRecorder())
		if err := e.SetTrustedProxies(trusted); err != nil {
			panic(err)
		}
		e.RemoteIPHeaders = []string{s.header}
		out["gin"] = str(func(req *http.Request) string {
			c.Request = req
			return c.ClientIP()
		})
	}

	// echo v4: only the given ranges trusted (its defaults trust loopback,
	// link-local and all private ranges).
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range mustCIDRs() {
		opts = append(opts, echo.TrustIPRange(n))
	}
	switch s.header {
	case "X-Forwarded-For":
		out["echo"] = str(echo.ExtractIPFromXFFHeader(opts...))
	case "X-Real-IP":
		out["echo"] = str(echo.ExtractIPFromRealIPHeader(opts...))
	}
	// echo-direct: the host part of r.RemoteAddr, unchecked, with no header
	// read (ExtractIPDirect). It is no answer for the other scenarios, but
	// for a direct client it is the least any request-level API that reads
	// r.RemoteAddr can do: the floor for "direct".
	if s.name == "direct" {
		out["echo-direct"] = str(echo.ExtractIPDirect())
	}

	// chi: the ClientIPFrom* middleware with the trusted prefixes; the answer
	// is read back from the request context, its only interface.
	var chiMW func(http.Handler) http.Handler
	switch s.header {
	case "X-Forwarded-For":
		chiMW = middleware.ClientIPFromXFF(trusted...)
	case "X-Real-IP":
		chiMW = middleware.ClientIPFromHeader(s.header, trusted...)
	}
	if chiMW != nil {
		var got netip.Addr
		h := chiMW(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			got = middleware.GetClientIPAddr(r.Context())
		}))
		out["chi"] = func(req *http.Request) (netip.Addr, string) {
			h.ServeHTTP(nil, req)
			return got, ""
		}
	}

	// realclientip-go v1.0.0: RightmostTrustedRange (no peer check in v1.0.0,
	// so a RemoteAddr strategy goes first in a chain for the direct case).
	var ranges []net.IPNet
	for _, n := range mustCIDRs() {
		ranges = append(ranges, *n)
	}
	var strat realclientip.Strategy
	if s.header == "X-Real-IP" {
		strat = realclientip.Must(realclientip.NewSingleIPHeaderStrategy(s.header))
	} else {
		strat = realclientip.Must(realclientip.NewRightmostTrustedRangeStrategy(s.header, ranges))
	}
	out["realclientip"] = str(func(req *http.Request) string {
		// The peer check realclientip v1.0.0 lacks: an untrusted peer is the client.
		if ap, err := netip.ParseAddrPort(req.RemoteAddr); err == nil {
			peer := ap.Addr().Unmap()
			inside := false
			for _, n := range ranges {
				if n.Contains(peer.AsSlice()) {
					inside = true
				}
			}
			if !inside {
				return peer.String()
			}
		}
		return strat.ClientIP(req.Header, req.RemoteAddr)
	})

	if s.impls != nil {
		for name := range out {
			if !s.impls[name] && !(strings.HasPrefix(name, "clientip") && s.impls["clientip"]) {
				delete(out, name)
			}
		}
	}
	plain := serverContext(tb, nil, s.remote)
	for name := range out {
		if reqs[name] == nil {
			reqs[name] = s.request().WithContext(plain)
		}
	}
	return out, reqs
}

// TestSameAnswers pins that every implementation names the same client for
// every scenario, so the benchmark compares equal work.
func TestSameAnswers(t *testing.T) {
	for _, s := range scenarios() {
		impls, reqs := implementations(t, s)
		for name, ex := range impls {
			assert.Equal(t, s.want, ex.answer(reqs[name]), "%s/%s", s.name, name)
		}
	}
}

// BenchmarkCompare runs every scenario through every implementation, each
// checked first to name the scenario's client (as TestSameAnswers does), so
// that a path that fails cannot look fast in a run that skips the tests
// (-run '^$').
func BenchmarkCompare(b *testing.B) {
	names := []string{"clientip", "clientip-conn", "chi", "echo", "echo-direct", "gin", "realclientip"}
	for _, s := range scenarios() {
		impls, reqs := implementations(b, s)
		for _, name := range names {
			ex, ok := impls[name]
			if !ok {
				continue
			}
			req := reqs[name]
			if got := ex.answer(req); got != s.want {
				b.Fatalf("%s/%s: got %q, want %q", s.name, name, got, s.want)
			}
			b.Run(s.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					ex(req)
				}
			})
		}
	}
}
