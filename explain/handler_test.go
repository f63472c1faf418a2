package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/trafficpolicy"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var (
	proxies10 = clientip.MustParsePrefixSet("10.0.0.0/8")
	xffConfig = clientip.Config{TrustedProxies: proxies10, Header: "X-Forwarded-For"}
	operators = clientip.MustParsePrefixSet("198.51.100.0/24")
	admins    = clientip.MustParsePrefixSet("192.0.2.0/24")
)

// request returns a GET request for the explain endpoint from remote, with
// the given X-Forwarded-For lines.
func request(remote string, xff ...string) *http.Request {
	req := httptest.NewRequest("GET", "/debug/clientip", nil)
	req.RemoteAddr = remote
	for _, v := range xff {
		req.Header.Add("X-Forwarded-For", v)
	}
	return req
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestNewRequiresTrust(t *testing.T) {
	_, err := New(Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// The handler is off by default: with nothing but Trust it refuses every
// request, loopback and trusted proxies included, as if nothing were mounted.
func TestOffByDefault(t *testing.T) {
	h, err := New(Config{Trust: clientip.MustNew(xffConfig)})
	require.NoError(t, err)
	for _, req := range []*http.Request{
		request("127.0.0.1:1"),
		request("10.0.0.1:40000", "198.51.100.7"),
		request("198.51.100.7:1"),
		request("[::1]:1"),
	} {
		w := serve(h, req)
		assert.Equal(t, http.StatusNotFound, w.Code, req.RemoteAddr)
		assert.Equal(t, "404 page not found\n", w.Body.String())
		assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	}
}

func TestAllow(t *testing.T) {
	masq := clientip.Config{TrustedProxies: proxies10, Header: "X-Forwarded-For", Masquerade: operators}
	tests := []struct {
		name  string
		cfg   clientip.Config
		allow Config
		req   *http.Request
		want  int
	}{
		{name: "resolved client in Allow, through a trusted proxy",
			cfg: xffConfig, allow: Config{Allow: operators}, req: request("10.0.0.1:40000", "198.51.100.7"), want: 200},
		{name: "spoof: a direct client forges X-Forwarded-For with an allowed address",
			cfg: xffConfig, allow: Config{Allow: operators}, req: request("203.0.113.9:1", "198.51.100.7"), want: 404},
		{name: "spoof: a client behind the proxy forges the left of X-Forwarded-For",
			cfg: xffConfig, allow: Config{Allow: operators}, req: request("10.0.0.1:40000", "198.51.100.7, 203.0.113.9"), want: 404},
		{name: "an unresolved request is not admitted by Allow",
			cfg: xffConfig, allow: Config{Allow: operators}, req: request("10.0.0.1:40000", "198.51.100.7, garbage"), want: 404},
		{name: "a masqueraded answer is not admitted by Allow",
			cfg: masq, allow: Config{Allow: operators}, req: request("10.0.0.1:40000", "198.51.100.7"), want: 404},
		{name: "an operator connecting directly is admitted by AllowPeers, whatever the walk says",
			cfg: xffConfig, allow: Config{AllowPeers: admins}, req: request("192.0.2.5:1", "garbage"), want: 200},
		{name: "spoof: a trusted proxy in AllowPeers admits no one behind it",
			cfg: xffConfig, allow: Config{AllowPeers: proxies10}, req: request("10.0.0.1:40000", "203.0.113.9"), want: 404},
		{name: "spoof: hop-count mode trusts every peer, so AllowPeers admits no one",
			cfg: clientip.Config{TrustedHops: 1, Header: "X-Forwarded-For"}, allow: Config{AllowPeers: admins}, req: request("192.0.2.5:1"), want: 404},
		{name: "a peer outside AllowPeers",
			cfg: xffConfig, allow: Config{AllowPeers: admins}, req: request("203.0.113.9:1"), want: 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.allow.Trust = clientip.MustNew(tc.cfg)
			h, err := New(tc.allow)
			require.NoError(t, err)
			w := serve(h, tc.req)
			assert.Equal(t, tc.want, w.Code, w.Body.String())
			if tc.want == 200 {
				assert.NoError(t, h.Check(tc.req))
			} else {
				assert.ErrorIs(t, h.Check(tc.req), ErrNotAllowed)
			}
		})
	}
}

func TestMethods(t *testing.T) {
	h, err := New(Config{Trust: clientip.MustNew(xffConfig), AllowPeers: admins})
	require.NoError(t, err)
	req := request("192.0.2.5:1")
	req.Method = "POST"
	w := serve(h, req)
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	req.RemoteAddr = "203.0.113.9:1"
	assert.Equal(t, http.StatusNotFound, serve(h, req).Code, "a request not admitted learns nothing, whatever its method")
}

func TestFormat(t *testing.T) {
	tests := []struct {
		query, accept string
		text          bool
	}{
		{"", "", false},
		{"", "*/*", true}, // curl, wget
		{"", "text/plain", true},
		{"", "application/json", false},
		{"", "text/plain;q=0.5, application/json", false},
		{"", "application/json;q=0.5, text/plain", true},
		{"", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", false}, // a browser
		{"format=text", "application/json", true},
		{"format=json", "*/*", false},
	}
	h, err := New(Config{Trust: clientip.MustNew(xffConfig), AllowPeers: admins})
	require.NoError(t, err)
	for _, tc := range tests {
		req := request("192.0.2.5:1")
		req.URL.RawQuery = tc.query
		req.Header.Set("Accept", tc.accept)
		w := serve(h, req)
		require.Equal(t, 200, w.Code)
		if tc.text {
			assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"), "%+v", tc)
			assert.True(t, strings.HasPrefix(w.Body.String(), "sourceip explain: request"), "%+v", tc)
		} else {
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"), "%+v", tc)
			var rep Report
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &rep), "%+v", tc)
			assert.Equal(t, Schema, rep.Schema)
		}
		assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	assert.Equal(t, string(want), string(got), "%s differs; run go test -update and review the diff", path)
}

// sslFacts is a PROXY v2 header from a load balancer that ended TLS and
// verified a client certificate.
func sslFacts(t *testing.T) proxyproto.Facts {
	ssl := proxyproto.SSL{Client: proxyproto.SSLClientTLS | proxyproto.SSLClientCertConn, Version: "TLSv1.3", CN: "device-17", Cipher: "TLS_AES_128_GCM_SHA256"}
	tlvs, err := proxyproto.NewTLVs(
		proxyproto.TLV{Type: proxyproto.TLVAuthority, Value: "mqtt.example.com"},
		proxyproto.TLV{Type: proxyproto.TLVUniqueID, Value: "\x00\x01\x02\xff"},
		ssl.TLV(),
	)
	require.NoError(t, err)
	return proxyproto.Facts{
		Peer: netip.MustParseAddrPort("192.0.2.10:33000"), Local: netip.MustParseAddrPort("10.1.0.5:8443"),
		Version: 2, Command: proxyproto.CommandProxy,
		Source: netip.MustParseAddrPort("198.51.100.77:52311"), Destination: netip.MustParseAddrPort("203.0.113.1:443"),
		TLVs: tlvs,
	}
}

// goldenCases are the scenarios whose reports are pinned in testdata.
func goldenCases(t *testing.T) []struct {
	name string
	cfg  Config
	req  *http.Request
} {
	lb := clientip.MustParsePrefixSet("192.0.2.10/31")
	withFacts := func(req *http.Request, f proxyproto.Facts) *http.Request {
		return req.WithContext(proxyproto.NewContext(req.Context(), f))
	}
	forged := request("10.0.0.1:40000", "6.6.6.6, 198.51.100.7", "10.0.0.2")
	forged.Header.Set("X-Real-IP", "127.0.0.1")
	hostile := request("10.0.0.1:40000", "\x1b[2J\x1b[H198.51.100.7, 10.0.0.2", strings.Repeat("10.9.9.9, ", 80)+"10.0.0.3")
	for range 12 {
		hostile.Header.Add("X-Real-IP", strings.Repeat("\x07", 300))
	}
	cluster := trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: trafficpolicy.ExternalCluster, Path: trafficpolicy.PathLoadBalancer, LB: trafficpolicy.LBProxyProtocol, LocalEndpoint: true}
	local := cluster
	local.External = trafficpolicy.ExternalLocal
	network := trafficpolicy.Network{Nodes: clientip.MustParsePrefixSet("10.1.0.0/24"), LoadBalancers: lb}
	noHeader := request("10.1.0.7:61000")
	return []struct {
		name string
		cfg  Config
		req  *http.Request
	}{
		{"forged-xff", Config{Trust: clientip.MustNew(xffConfig)}, forged},
		{"direct-client-forges", Config{Trust: clientip.MustNew(xffConfig)}, request("203.0.113.9:51000", "198.51.100.7")},
		{"malformed", Config{Trust: clientip.MustNew(xffConfig)}, request("10.0.0.1:40000", "198.51.100.7, not-an-ip, 10.0.0.2")},
		{"proxy-protocol-ssl", Config{Trust: clientip.MustNew(clientip.Config{TrustedProxies: lb}), Policy: &local, Network: network},
			withFacts(request("198.51.100.77:52311"), sslFacts(t))},
		{"masqueraded-cluster", Config{Trust: clientip.MustNew(clientip.Config{TrustedProxies: lb, Masquerade: network.Nodes}), Policy: &cluster, Network: network},
			noHeader},
		{"all-trusted", Config{Trust: clientip.MustNew(xffConfig)}, request("10.0.0.1:40000", "10.0.0.5")},
		{"hostile", Config{Trust: clientip.MustNew(xffConfig)}, hostile},
		{"unreadable-remote-addr", Config{Trust: clientip.MustNew(xffConfig)}, request("not-an-address", "198.51.100.7")},
		// The peer is trusted now; it was not when its connection arrived.
		{"judged-untrusted", Config{Trust: clientip.MustNew(xffConfig)},
			withFacts(request("10.0.0.1:40000", "198.51.100.7"), proxyproto.Facts{Peer: netip.MustParseAddrPort("10.0.0.1:40000"), PeerUntrusted: true})},
	}
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(tc.cfg)
			require.NoError(t, err)
			rep := h.Report(tc.req)
			js, err := json.MarshalIndent(&rep, "", "  ")
			require.NoError(t, err)
			golden(t, tc.name+".json", append(js, '\n'))
			var text bytes.Buffer
			require.NoError(t, rep.WriteText(&text))
			golden(t, tc.name+".txt", text.Bytes())

			// The JSON document decodes to the same report, which renders
			// the same text: what cmd/sourceip -fetch relies on.
			var back Report
			require.NoError(t, json.Unmarshal(js, &back))
			assert.Equal(t, rep, back)
			var again bytes.Buffer
			require.NoError(t, back.WriteText(&again))
			assert.Equal(t, text.String(), again.String())
		})
	}
}

// An explanation of a hostile request is bounded, and its text holds no
// control character a client wrote.
func TestHostileBounded(t *testing.T) {
	h, err := New(Config{Trust: clientip.MustNew(clientip.Config{TrustedProxies: proxies10, Header: "X-Forwarded-For", MaxHeaderBytes: 1 << 20})})
	require.NoError(t, err)
	req := request("10.0.0.1:40000", strings.Repeat("10.1.1.1,", 50_000)+"\x1b]0;owned\x07")
	for range 100 {
		req.Header.Add("X-Real-IP", strings.Repeat("\x1b[31m", 1000))
	}
	rep := h.Report(req)
	js, err := json.Marshal(&rep)
	require.NoError(t, err)
	assert.Less(t, len(js), 64<<10, "JSON size")
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	assert.Less(t, text.Len(), 64<<10, "text size")
	for _, c := range text.String() {
		if c < 0x20 && c != '\n' {
			t.Fatalf("control character %q in the text output", c)
		}
	}
	assert.Equal(t, 50_001-66, rep.OmittedEntries)
}

// swapTrust is a live Trust whose Resolver can be replaced.
type swapTrust struct {
	r atomic.Pointer[clientip.Resolver]
}

func (s *swapTrust) Resolver() *clientip.Resolver { return s.r.Load() }

// acceptedConn returns a loopback connection accepted through
// middleware.NewListener resolving with trust; both ends close when t ends.
func acceptedConn(t *testing.T, trust clientip.Trust) net.Conn {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { inner.Close() })
	ln := middleware.NewListener(inner, trust)
	dial, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { dial.Close() })
	c, err := ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestReportConn(t *testing.T) {
	trust := &swapTrust{}
	trust.r.Store(clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.0/8")}))
	c := acceptedConn(t, trust.Resolver())
	h, err := New(Config{Trust: trust, AllowPeers: admins})
	require.NoError(t, err)

	rep := h.ReportConn(c, "device-17")
	assert.Equal(t, "connection", rep.Kind)
	assert.Equal(t, "device-17", rep.Connection.ID)
	require.NotNil(t, rep.Error, "a loopback peer inside the trusted set with nothing behind it")
	assert.Equal(t, clientip.ReasonAllTrusted, rep.Error.Reason)
	assert.Nil(t, rep.Recorded, "nothing changed since accept")

	// The trust configuration changes: the walk now names the peer, and
	// the report shows what the connection recorded at accept.
	trust.r.Store(clientip.MustNew(clientip.Config{}))
	rep = h.ReportConn(c, "device-17")
	assert.Nil(t, rep.Error)
	assert.Equal(t, clientip.SourceSocket, rep.Result.Source)
	require.NotNil(t, rep.Recorded)
	assert.Equal(t, clientip.ReasonAllTrusted, rep.Recorded.Error.Reason)

	// A connection that did not come through NewListener.
	other, peer := net.Pipe()
	defer other.Close()
	defer peer.Close()
	rep = h.ReportConn(other, "")
	require.NotNil(t, rep.Error)
	assert.Contains(t, rep.Error.Message, middleware.ErrNoResult.Error())
	assert.Contains(t, rep.Error.Hint, "NewListener")

	// ServeConn answers admitted requests only.
	w := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeConn(w, r, c, "device-17") }), request("192.0.2.5:1"))
	assert.Equal(t, 200, w.Code)
	assert.Contains(t, w.Body.String(), `"id": "device-17"`)
	w = serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeConn(w, r, c, "device-17") }), request("203.0.113.9:1"))
	assert.Equal(t, 404, w.Code)
}

func TestPolicyChecks(t *testing.T) {
	lb := clientip.MustParsePrefixSet("192.0.2.10/31")
	network := trafficpolicy.Network{Nodes: clientip.MustParsePrefixSet("10.1.0.0/24"), LoadBalancers: lb}
	local := trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: trafficpolicy.ExternalLocal, Path: trafficpolicy.PathLoadBalancer, LB: trafficpolicy.LBProxyProtocol, LocalEndpoint: true}
	status := func(p *PolicyInfo) map[string]string {
		m := map[string]string{}
		for _, c := range p.Checks {
			m[c.Name] = c.Status
		}
		return m
	}
	cfg := clientip.Config{TrustedProxies: lb, Masquerade: network.Nodes.Union(lb)}
	h, err := New(Config{Trust: clientip.MustNew(cfg), Policy: &local, Network: network})
	require.NoError(t, err)

	req := request("198.51.100.77:52311")
	rep := h.Report(req.WithContext(proxyproto.NewContext(req.Context(), sslFacts(t))))
	assert.Equal(t, map[string]string{"proxy_header": "ok", "peer": "ok", "client_layer": "ok", "recipe_header": "ok", "recipe_trust": "ok", "recipe_masquerade": "ok"}, status(rep.Policy))

	// The load balancer's PROXY header did not reach the application: no
	// proxyproto.ConnContext, so nothing is known of it.
	rep = h.Report(request("192.0.2.10:33000"))
	assert.Equal(t, "unknown", status(rep.Policy)["proxy_header"])
	assert.Equal(t, "mismatch", status(rep.Policy)["client_layer"])

	// A connection context without a PROXY header from the load balancer.
	f := sslFacts(t)
	f.Version, f.Command, f.Source, f.Destination, f.TLVs = 0, proxyproto.CommandNone, netip.AddrPort{}, netip.AddrPort{}, proxyproto.TLVs{}
	req = request("192.0.2.10:33000")
	rep = h.Report(req.WithContext(proxyproto.NewContext(context.Background(), f)))
	assert.Equal(t, "mismatch", status(rep.Policy)["proxy_header"])

	// A configuration that reads a header the recipe does not.
	h, err = New(Config{Trust: clientip.MustNew(clientip.Config{TrustedProxies: lb, Header: "X-Forwarded-For"}), Policy: &local, Network: network})
	require.NoError(t, err)
	rep = h.Report(request("192.0.2.10:33000"))
	assert.Equal(t, "mismatch", status(rep.Policy)["recipe_header"])
	assert.Equal(t, "mismatch", status(rep.Policy)["recipe_masquerade"])
}

// recipe_trust: a configuration that trusts more than the recipe (here the
// load balancers and a public /24 the recipe knows nothing of) believes
// whoever sits in the extra prefix about any address — the dangerous
// direction — so the check is a mismatch that names the extra prefix, not
// "ok" because the recipe's groups are covered.
func TestPolicyRecipeTrustMoreThanRecipe(t *testing.T) {
	lb := clientip.MustParsePrefixSet("192.0.2.10/31")
	network := trafficpolicy.Network{Nodes: clientip.MustParsePrefixSet("10.1.0.0/24"), LoadBalancers: lb}
	local := trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: trafficpolicy.ExternalLocal, Path: trafficpolicy.PathLoadBalancer, LB: trafficpolicy.LBProxyProtocol, LocalEndpoint: true}
	cfg := clientip.Config{TrustedProxies: lb.Union(clientip.MustParsePrefixSet("203.0.113.0/24")), Masquerade: network.Nodes.Union(lb)}
	h, err := New(Config{Trust: clientip.MustNew(cfg), Policy: &local, Network: network})
	require.NoError(t, err)

	req := request("198.51.100.77:52311")
	rep := h.Report(req.WithContext(proxyproto.NewContext(req.Context(), sslFacts(t))))
	var check PolicyCheck
	for _, c := range rep.Policy.Checks {
		if c.Name == "recipe_trust" {
			check = c
		}
	}
	assert.Equal(t, "mismatch", check.Status)
	assert.Contains(t, check.Text, "trusts more than the recipe")
	assert.Contains(t, check.Text, "203.0.113.0/24")
	assert.NotContains(t, check.Text, "in 192.0.2.10/31")
}

func TestAdviceView(t *testing.T) {
	a, err := NewAdvisor(AdvisorConfig{Trust: clientip.MustNew(xffConfig)})
	require.NoError(t, err)
	h, err := New(Config{Trust: clientip.MustNew(xffConfig), AllowPeers: admins, Advisor: a})
	require.NoError(t, err)
	observed := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := range 10 {
		serve(observed, request("10.0.0.1:40000", netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}).String()))
	}
	req := request("192.0.2.5:1")
	req.URL.RawQuery = "view=advice"
	w := serve(h, req)
	require.Equal(t, 200, w.Code)
	var adv Advice
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &adv))
	assert.Equal(t, AdviceSchema, adv.Schema)
	assert.Equal(t, uint64(10), adv.Sampled)
	req.URL.RawQuery = "view=advice&format=text"
	assert.Contains(t, serve(h, req).Body.String(), "sourceip advice: 10 requests sampled")

	req.URL.RawQuery = "view=nope"
	assert.Equal(t, http.StatusBadRequest, serve(h, req).Code)
	h, err = New(Config{Trust: clientip.MustNew(xffConfig), AllowPeers: admins})
	require.NoError(t, err)
	req.URL.RawQuery = "view=advice"
	assert.Equal(t, http.StatusNotFound, serve(h, req).Code, "no advisor")
	req.RemoteAddr = "203.0.113.9:1"
	assert.Equal(t, http.StatusNotFound, serve(h, req).Code, "not admitted")
}

// TestHeaderlessUpstreamNote: a request on a connection from one of the PROXY
// listener's Upstreams without a PROXY header ends the walk at the load
// balancer (the spoofing trick of writing one's own X-Forwarded-For behind
// a load balancer that relays the bytes as they came). The report gives the
// resolver's answer and says why the header was not read, instead of
// leaving only the hint of an all-trusted chain (an internal caller, a set
// too wide), which points the operator the wrong way.
func TestHeaderlessUpstreamNote(t *testing.T) {
	h, err := New(Config{Trust: clientip.MustNew(xffConfig)})
	require.NoError(t, err)
	req := request("10.0.0.1:40000", "203.0.113.66, 10.0.0.2")
	f := proxyproto.Facts{Peer: netip.MustParseAddrPort("10.0.0.1:40000"), NoHeaderFromUpstream: true}
	req = req.WithContext(proxyproto.NewContext(req.Context(), f))
	rep := h.Report(req)
	require.NotNil(t, rep.Error)
	assert.Equal(t, clientip.ReasonAllTrusted, rep.Error.Reason)
	_, wantErr := clientip.MustNew(xffConfig).ResolveRequest(req)
	assert.Equal(t, clientip.ReasonOf(wantErr), rep.Error.Reason, "the resolver's answer")
	assert.Contains(t, strings.Join(rep.Notes, "\n"), "without a PROXY header")
}
