package clientip

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// documentedForwarding is IsForwardingHeader's list as its documentation
// gives it, lower case; with every name starting with x-forwarded-.
var documentedForwarding = strings.Fields(`forwarded forwarded-for x-forwarded
	x-real-ip x-client-ip client-ip x-cluster-client-ip true-client-ip cf-connecting-ip cf-connecting-ipv6 cf-pseudo-ipv4
	fastly-client-ip fly-client-ip x-azure-clientip x-azure-socketip x-appengine-user-ip cloudfront-viewer-address
	x-envoy-external-address x-envoy-internal x-originating-ip x-remote-ip x-remote-addr x-proxyuser-ip
	wl-proxy-client-ip proxy-client-ip x-original-forwarded-for
	x-host x-original-host x-scheme x-url-scheme front-end-https x-arr-ssl cf-visitor cloudfront-forwarded-proto
	x-original-url x-rewrite-url`)

// documentedIsForwarding is the documented rule, written apart from the code.
func documentedIsForwarding(name string) bool {
	n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	return strings.HasPrefix(n, "x-forwarded-") || slices.Contains(documentedForwarding, n)
}

func TestIsForwardingHeader(t *testing.T) {
	for _, name := range documentedForwarding {
		assert.True(t, IsForwardingHeader(name), name)
		assert.True(t, IsForwardingHeader(strings.ToUpper(name)), "upper case %s", name)
		assert.True(t, IsForwardingHeader(strings.ReplaceAll(name, "-", "_")), "underscore variant of %s", name)
	}
	for name, want := range map[string]bool{
		"X-Forwarded-For": true, "X_Forwarded_For": true, "x_forwarded_for": true, "X-Forwarded-Client-Cert": true,
		"X-Forwarded-Tls-Client-Cert": true, "X-Forwarded-Anything": true, "X-Forwarded-": true, "X-Forwarded": true,
		"Cf-Connecting-Ip": true, "X-Real-Ip": true, "X_Real_IP": true,
		"Via": false, "X-Forwardedfor": false, "X-Forward-For": false, "Host": false, "Cookie": false, "Forwarded-Fo": false, "": false,
	} {
		assert.Equal(t, want, IsForwardingHeader(name), name)
		assert.Equal(t, want, documentedIsForwarding(name), "the test's own rule for %s", name)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { IsForwardingHeader("X_Forwarded_Prefix") }))
}

// forwardRequest is an inbound request of the Forwarder tests: from remote,
// on the proxy's 192.0.2.1:443, for Host example.com, with header kv pairs.
func forwardRequest(remote string, tlsOn bool, kv ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
	r.RemoteAddr = remote
	r.Header = hdr(kv...)
	if tlsOn {
		r.TLS = &tls.ConnectionState{}
	}
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 443}))
}

// forgedForwarding are forwarding headers a client makes up, in every
// spelling the Forwarder must remove.
var forgedForwarding = []string{
	"X-Forwarded-For", "6.6.6.6", "Forwarded", "for=6.6.6.6;host=evil.example", "X-Real-Ip", "6.6.6.6",
	"X_forwarded_for", "6.6.6.6", "X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https",
	"X-Forwarded-Prefix", "//evil.example", "Cf-Connecting-Ip", "6.6.6.6", "True-Client-Ip", "6.6.6.6",
	"X-Original-Url", "/admin", "X-Forwarded-Client-Cert", "Hash=forged", "X-Envoy-Internal", "true",
}

func TestForwarderHeader(t *testing.T) {
	xffTrust := MustNew(xffCfg())
	both := ForwardConfig{Trust: xffTrust, XForwardedFor: true, Forwarded: true}
	withOrigin := both
	withOrigin.Origin = MustNewOriginReader(OriginConfig{Proto: "X-Forwarded-Proto", Host: "X-Forwarded-Host", Prefix: "X-Forwarded-Prefix"})
	withOrigin.XForwardedOrigin = true
	tests := []struct {
		name    string
		cfg     ForwardConfig
		in      *http.Request
		want    http.Header // every header of out after the rewrite
		wantErr error
	}{
		{name: "a direct client: only its socket address, every forged header removed", cfg: both,
			in:   forwardRequest("203.0.113.9:5000", false, append(slices.Clone(forgedForwarding), "Accept", "*/*")...),
			want: http.Header{"Accept": {"*/*"}, "X-Forwarded-For": {"203.0.113.9"}, "Forwarded": {"for=203.0.113.9;by=192.0.2.1"}}},
		{name: "behind trusted proxies: the client and the trusted hops, never the entries left of the client", cfg: both,
			in: forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.0.0.2", "X-Real-Ip", "6.6.6.6"),
			want: http.Header{"X-Forwarded-For": {"198.51.100.7, 10.0.0.2, 10.0.0.1"},
				"Forwarded": {"for=198.51.100.7, for=10.0.0.2, for=10.0.0.1;by=192.0.2.1"}}},
		{name: "repeated lines and odd spacing come out as one canonical list", cfg: both,
			in:   forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "6.6.6.6,198.51.100.7", "X-Forwarded-For", " ,10.0.0.2 ,"),
			want: http.Header{"X-Forwarded-For": {"198.51.100.7, 10.0.0.2, 10.0.0.1"}, "Forwarded": {"for=198.51.100.7, for=10.0.0.2, for=10.0.0.1;by=192.0.2.1"}}},
		{name: "canonical forms: an entry with a port, a mapped address and a zone are written as addresses",
			cfg: ForwardConfig{Trust: MustNew(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/8, fe80::/10"), Header: "X-Forwarded-For"}), XForwardedFor: true, Forwarded: true},
			in:  forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "[2001:DB8::7]:443, fe80::a%eth0, ::ffff:10.0.0.2"),
			want: http.Header{"X-Forwarded-For": {"2001:db8::7, fe80::a, 10.0.0.2, 10.0.0.1"},
				"Forwarded": {`for="[2001:db8::7]", for="[fe80::a]", for=10.0.0.2, for=10.0.0.1;by=192.0.2.1`}}},
		{name: "a client named in Forwarded", cfg: ForwardConfig{Trust: MustNew(fwdCfg()), XForwardedFor: true},
			in:   forwardRequest("10.0.0.1:4000", false, "Forwarded", `for=6.6.6.6, for="[2001:db8::7]:80";proto=https, for=10.0.0.2`),
			want: http.Header{"X-Forwarded-For": {"2001:db8::7, 10.0.0.2, 10.0.0.1"}}},
		{name: "a client named by a single-address header", cfg: ForwardConfig{Trust: MustNew(Config{TrustedProxies: private10, Header: "X-Real-IP"}), XForwardedFor: true},
			in:   forwardRequest("10.0.0.1:4000", false, "X-Real-Ip", "198.51.100.7", "X-Forwarded-For", "6.6.6.6"),
			want: http.Header{"X-Forwarded-For": {"198.51.100.7, 10.0.0.1"}}},
		{name: "the origin: proto= and host= in the client's element, X-Forwarded-* set", cfg: withOrigin,
			in: forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com:8443",
				"X-Forwarded-Prefix", "/app"),
			want: http.Header{"X-Forwarded-For": {"198.51.100.7, 10.0.0.1"},
				"Forwarded":         {`for=198.51.100.7;proto=https;host="example.com:8443", for=10.0.0.1;by=192.0.2.1`},
				"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"example.com:8443"}, "X-Forwarded-Port": {"8443"}, "X-Forwarded-Prefix": {"/app"}}},
		{name: "the origin of a direct client is its own request's, whatever it forged", cfg: withOrigin,
			in: forwardRequest("203.0.113.9:5000", true, forgedForwarding...),
			want: http.Header{"X-Forwarded-For": {"203.0.113.9"}, "Forwarded": {"for=203.0.113.9;by=192.0.2.1;proto=https;host=example.com"},
				"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"example.com"}, "X-Forwarded-Port": {"443"}}},
		{name: "a trusted Unix-socket peer has no address to write",
			cfg:  ForwardConfig{Trust: MustNew(Config{TrustUnixSocket: true, Header: "X-Forwarded-For"}), XForwardedFor: true},
			in:   unixRequest(forwardRequest("@", false, "X-Forwarded-For", "6.6.6.6, 198.51.100.7")),
			want: http.Header{"X-Forwarded-For": {"198.51.100.7"}}},
		{name: "hop-by-hop: headers the client names in Connection are removed (CVE-2024-45410), Upgrade and TE are kept", cfg: both,
			in: forwardRequest("203.0.113.9:5000", false, "Connection", "X-Custom, upgrade, te, X_Forwarded_Host", "X-Custom", "1", "Upgrade", "websocket",
				"Te", "trailers"),
			want: http.Header{"Connection": {"X-Custom, upgrade, te"}, "Upgrade": {"websocket"}, "Te": {"trailers"}, "X-Forwarded-For": {"203.0.113.9"},
				"Forwarded": {"for=203.0.113.9;by=192.0.2.1"}}},
		{name: "ForwardConfig.Remove, any case and underscores",
			cfg:  ForwardConfig{Trust: xffTrust, XForwardedFor: true, Remove: []string{"X-Internal-Auth"}},
			in:   forwardRequest("203.0.113.9:5000", false, "X_internal_auth", "admin", "X-Internal-Auth", "admin"),
			want: http.Header{"X-Forwarded-For": {"203.0.113.9"}}},

		{name: "an unreadable chain: marked as forwarded for an unknown client, the error returned", cfg: both,
			in:   forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "198.51.100.7, garbage", "X-Real-Ip", "6.6.6.6"),
			want: http.Header{"X-Forwarded-For": {"unknown"}, "Forwarded": {"for=unknown;by=192.0.2.1"}}, wantErr: ErrMalformed},
		{name: "every hop trusted: nothing written", cfg: both,
			in: forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "10.0.0.9"), want: http.Header{}, wantErr: ErrAllTrusted},
		{name: "a masqueraded client never reaches the next hop as a client",
			cfg:  ForwardConfig{Trust: MustNew(Config{TrustedProxies: private10, Header: "X-Forwarded-For", Masquerade: MustParsePrefixSet("192.0.2.0/28")}), XForwardedFor: true},
			in:   forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "192.0.2.3"),
			want: http.Header{"X-Forwarded-For": {"unknown"}}, wantErr: ErrMasqueraded},
		{name: "an unreadable origin: no address and no origin written", cfg: withOrigin,
			in:   forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "198.51.100.7", "X-Forwarded-Host", "example.com"),
			want: http.Header{"X-Forwarded-For": {"unknown"}, "Forwarded": {"for=unknown;by=192.0.2.1"}}, wantErr: ErrOriginMissing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewForwarder(tc.cfg)
			require.NoError(t, err)
			before := tc.in.Header.Clone()
			out := tc.in.Header.Clone()
			_, err = f.Header(out, tc.in)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, out)
			assert.Equal(t, before, tc.in.Header, "the inbound request is only read")
		})
	}
}

// Spoofing trick, request laundering: a request whose client this proxy
// cannot vouch for must not reach the next hop as this proxy's own. Sent
// without any forwarding header, it reads there as a request that every
// hop is trusted on (ErrAllTrusted, with this proxy as the outermost hop),
// which Rule.AdmitInternal admits as an internal caller's and an
// application that trusts its proxies takes for the proxy's own: a client
// sends a Host the origin reader refuses ("a..b"), arrives masqueraded, or
// skips the load balancer in hop-count mode, and is let in as internal.
// The Forwarder marks such a request as forwarded for an unknown client
// (X-Forwarded-For: unknown, RFC 7239 §6.2's for=unknown), which a next
// hop's walk refuses whatever it trusts. A chain whose every hop is trusted
// is an internal caller's indeed, and is still forwarded as the proxy's own.
func TestForwarderUnverifiedIsNotTheProxysOwn(t *testing.T) {
	origin := MustNewOriginReader(OriginConfig{AllowedHosts: []string{"example.com"}})
	withHost := func(r *http.Request, host string) *http.Request { r.Host = host; return r }
	tests := []struct {
		name    string
		trust   Config
		origin  *OriginReader
		in      *http.Request
		wantErr error
	}{
		{name: "a Host the origin reader refuses", trust: xffCfg(), origin: origin,
			in: withHost(forwardRequest("203.0.113.9:5000", false), "a..b"), wantErr: ErrOriginMalformed},
		{name: "a Host outside AllowedHosts", trust: xffCfg(), origin: origin,
			in: withHost(forwardRequest("203.0.113.9:5000", false), "evil.example"), wantErr: ErrHostNotAllowed},
		{name: "a masqueraded client", trust: Config{TrustedProxies: private10, Header: "X-Forwarded-For", Masquerade: MustParsePrefixSet("198.51.100.0/24")},
			in: forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "198.51.100.7"), wantErr: ErrMasqueraded},
		{name: "an unreadable chain", trust: xffCfg(),
			in: forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "198.51.100.7, garbage"), wantErr: ErrMalformed},
		{name: "hop-count mode: a client that skipped the load balancer", trust: Config{TrustedHops: 2, Header: "X-Forwarded-For"},
			in: forwardRequest("203.0.113.9:5000", false), wantErr: ErrTooFewHops},
	}
	// The next hop trusts this proxy (192.0.2.1, forwardRequest's local
	// address), reading either format.
	nextXFF := MustNew(Config{TrustedProxies: MustParsePrefixSet("192.0.2.1"), Header: "X-Forwarded-For"})
	nextFwd := MustNew(Config{TrustedProxies: MustParsePrefixSet("192.0.2.1"), Header: "Forwarded"})
	next := Transport{Peer: ap("192.0.2.1:50000")}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewForwarder(ForwardConfig{Trust: MustNew(tc.trust), Origin: tc.origin, XForwardedFor: true, Forwarded: true})
			require.NoError(t, err)
			out := tc.in.Header.Clone()
			_, err = f.Header(out, tc.in)
			require.ErrorIs(t, err, tc.wantErr)
			assert.Equal(t, http.Header{"X-Forwarded-For": {"unknown"}, "Forwarded": {"for=unknown;by=192.0.2.1"}}, out)
			_, err = nextXFF.Resolve(next, out)
			assert.ErrorIs(t, err, ErrMalformed, "the next hop reading X-Forwarded-For")
			_, err = nextFwd.Resolve(next, out)
			assert.ErrorIs(t, err, ErrUnknownHop, "the next hop reading Forwarded")
		})
	}

	// Every hop trusted: an internal caller's request, forwarded as the
	// proxy's own.
	f, err := NewForwarder(ForwardConfig{Trust: MustNew(xffCfg()), XForwardedFor: true, Forwarded: true})
	require.NoError(t, err)
	in := forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "10.0.0.9")
	out := in.Header.Clone()
	_, err = f.Header(out, in)
	require.ErrorIs(t, err, ErrAllTrusted)
	assert.Empty(t, out)
	_, err = nextXFF.Resolve(next, out)
	assert.ErrorIs(t, err, ErrAllTrusted)
}

// unixRequest marks r as arrived on a Unix-domain listener.
func unixRequest(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.UnixAddr{Name: "/run/app.sock", Net: "unix"}))
}

// TestForwarderConnectionOut: out's own Connection header loses the tokens
// that name forwarding headers, so no later hop drops what was written.
func TestForwarderConnectionOut(t *testing.T) {
	f, err := NewForwarder(ForwardConfig{Trust: MustNew(xffCfg()), XForwardedFor: true})
	require.NoError(t, err)
	in := forwardRequest("203.0.113.9:5000", false)
	out := http.Header{"Connection": {"Upgrade, X-Forwarded-For", "x_real_ip"}, "Upgrade": {"websocket"}}
	_, err = f.Header(out, in)
	require.NoError(t, err)
	assert.Equal(t, http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "X-Forwarded-For": {"203.0.113.9"}}, out)

	out = http.Header{"Connection": {"X-Forwarded-For"}}
	_, err = f.Header(out, in)
	require.NoError(t, err)
	assert.Equal(t, http.Header{"X-Forwarded-For": {"203.0.113.9"}}, out, "an emptied Connection header is removed")
}

func TestNewForwarderValidation(t *testing.T) {
	for name, cfg := range map[string]ForwardConfig{
		"no Trust":                        {XForwardedFor: true},
		"XForwardedOrigin without Origin": {Trust: MustNew(xffCfg()), XForwardedOrigin: true, XForwardedFor: true},
		"an empty name to remove":         {Trust: MustNew(xffCfg()), Remove: []string{""}, XForwardedFor: true},
		"an invalid field name to remove": {Trust: MustNew(xffCfg()), Remove: []string{"X Custom"}, XForwardedFor: true},
	} {
		_, err := NewForwarder(cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
	}
}

// vanishingTrust is a Trust of an application's own whose Resolver turns
// nil while the proxy runs.
type vanishingTrust struct {
	r    *Resolver
	gone bool
}

func (v *vanishingTrust) Resolver() *Resolver {
	if v.gone {
		return nil
	}
	return v.r
}

// Review finding: Forwarder.Header called a method on the nil *Resolver of
// a Trust whose Resolver turned nil after NewForwarder, and panicked; a nil
// *Store as Trust passed NewForwarder and panicked on the first request.
// NewForwarder refuses the one, and Header fails closed on the other: the
// request is marked as forwarded for an unknown client and the error wraps
// ErrNoTrust.
func TestForwarderNilResolver(t *testing.T) {
	_, err := NewForwarder(ForwardConfig{Trust: (*Store)(nil), XForwardedFor: true})
	assert.ErrorIs(t, err, ErrInvalidConfig, "a nil *Store")

	vt := &vanishingTrust{r: MustNew(xffCfg())}
	f, err := NewForwarder(ForwardConfig{Trust: vt, XForwardedFor: true, Forwarded: true})
	require.NoError(t, err)
	vt.gone = true
	out := http.Header{"X-Forwarded-For": {"6.6.6.6"}}
	var res Result
	require.NotPanics(t, func() {
		res, err = f.Header(out, forwardRequest("10.0.0.1:4000", false, "X-Forwarded-For", "203.0.113.7"))
	})
	assert.ErrorIs(t, err, ErrNoTrust)
	assert.Equal(t, Result{}, res)
	assert.Equal(t, http.Header{"X-Forwarded-For": {"unknown"}, "Forwarded": {"for=unknown;by=192.0.2.1"}}, out)
}

// Review finding: a Forwarder configured with neither XForwardedFor nor
// Forwarded stripped every forwarding header and wrote none, so each
// request, whatever its chain (unverifiable ones included, which the
// Forwarder otherwise marks "unknown"), reached a next hop that trusts this
// proxy as the proxy's own: an internal caller's, which a policy's
// AdmitInternal rule lets in. NewForwarder refuses that configuration.
func TestNewForwarderNeedsAFormat(t *testing.T) {
	for name, cfg := range map[string]ForwardConfig{
		"neither format":         {Trust: MustNew(xffCfg())},
		"only the origin":        {Trust: MustNew(xffCfg()), Origin: MustNewOriginReader(OriginConfig{Proto: "X-Forwarded-Proto"}), XForwardedOrigin: true},
		"only headers to remove": {Trust: MustNew(xffCfg()), Remove: []string{"X-Internal-Auth"}},
	} {
		f, err := NewForwarder(cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
		assert.Nil(t, f, name)
	}
	for name, cfg := range map[string]ForwardConfig{
		"X-Forwarded-For": {Trust: MustNew(xffCfg()), XForwardedFor: true},
		"Forwarded":       {Trust: MustNew(xffCfg()), Forwarded: true},
	} {
		_, err := NewForwarder(cfg)
		assert.NoError(t, err, name)
	}
}

// refChain is the chain the reference walker verified, as X-Forwarded-For
// lists it, rebuilt from the model's hop with the model's own parsers.
func refChain(cfg Config, tr Transport, h http.Header, m refResult) []netip.Addr {
	base := 0
	if tr.Proxy.Addr().IsValid() {
		base = 1
	}
	name := http.CanonicalHeaderKey(cfg.Header)
	var hops []refHop
	switch name {
	case "X-Forwarded-For":
		hops = refXFF(h[name])
	case "Forwarded":
		hops, _ = refForwarded(h[name])
	case "":
	default:
		if lines := h[name]; len(lines) > 0 {
			hops = []refHop{refParseListAddr(strings.Trim(lines[0], " \t"))}
		}
	}
	var chain []netip.Addr
	if m.source.FromHeader() {
		for i := m.hop - base - 1; i >= 0; i-- {
			chain = append(chain, hops[i].addr)
		}
	}
	if base == 1 && m.hop >= 1 {
		chain = append(chain, tr.Proxy.Addr().WithZone("").Unmap())
	}
	if tr.Peer.Addr().IsValid() {
		chain = append(chain, tr.Peer.Addr().WithZone("").Unmap())
	}
	return chain
}

// refForwardHeaders is what the documentation says a Forwarder writes for
// a verified chain and origin.
func refForwardHeaders(cfg ForwardConfig, chain []netip.Addr, by netip.Addr, o Origin) http.Header {
	out := http.Header{}
	var xff, fwd []string
	for i, a := range chain {
		xff = append(xff, a.String())
		node := func(a netip.Addr) string {
			if a.Is6() {
				return `"[` + a.String() + `]"`
			}
			return a.String()
		}
		e := "for=" + node(a)
		if i == len(chain)-1 && by.IsValid() {
			e += ";by=" + node(by)
		}
		if i == 0 && o.IsValid() {
			host := o.HostPort()
			if strings.ContainsAny(host, ":[") {
				host = `"` + host + `"`
			}
			e += ";proto=" + o.Scheme + ";host=" + host
		}
		fwd = append(fwd, e)
	}
	if cfg.XForwardedFor && len(chain) > 0 {
		out.Set("X-Forwarded-For", strings.Join(xff, ", "))
	}
	if cfg.Forwarded && len(chain) > 0 {
		out.Set("Forwarded", strings.Join(fwd, ", "))
	}
	if cfg.XForwardedOrigin {
		port := map[bool]string{true: "443", false: "80"}[o.Scheme == "https"]
		if o.Port != 0 {
			port = netip.AddrPortFrom(netip.IPv4Unspecified(), o.Port).String()[len("0.0.0.0:"):]
		}
		out.Set("X-Forwarded-Proto", o.Scheme)
		out.Set("X-Forwarded-Host", o.HostPort())
		out.Set("X-Forwarded-Port", port)
		if o.Prefix != "" {
			out.Set("X-Forwarded-Prefix", o.Prefix)
		}
	}
	return out
}

// refUnknownHeaders is what the Forwarder writes for a request whose client
// it cannot vouch for: one hop whose address is unknown.
func refUnknownHeaders(cfg ForwardConfig, by netip.Addr) http.Header {
	out := http.Header{}
	if cfg.XForwardedFor {
		out.Set("X-Forwarded-For", "unknown")
	}
	if cfg.Forwarded {
		e := "for=unknown"
		if by.IsValid() {
			e += ";by=" + by.String() // forwardRequest's local address is IPv4
		}
		out.Set("Forwarded", e)
	}
	return out
}

// FuzzForward proves that no byte a client wrote reaches an outgoing
// forwarding header unless the walk verified it: whatever the inbound
// headers, the forwarding headers of the outbound request are exactly those
// the reference model builds, address by address, from the chain the
// reference walker verified and the origin the reference origin model read
// (each written from a parsed value, never copied), or, when the walk or
// the origin fails (other than ErrAllTrusted), the mark of a client whose
// address is unknown, and every other
// forwarding header (IsForwardingHeader's documented list, underscore
// variants included) and every header the client named in Connection is
// gone.
func FuzzForward(f *testing.F) {
	for _, s := range append(fuzzSeeds, longSeeds...) {
		f.Add(s, "", "X-Forwarded-Host: evil", "x_forwarded_for", "https", uint8(0))
	}
	f.Add("6.6.6.6, 198.51.100.7", "10.0.0.2", "X-Custom, X-Forwarded-Proto", "X-Custom", "https", uint8(0x81))
	f.Add(`for=6.6.6.6, for=198.51.100.7;proto=https;host="a.example:8443"`, "", "", "X-Real-Ip", "http", uint8(9))
	f.Add("fe80::5%eth0, 10.0.0.2", "", "upgrade", "Upgrade", "HTTPS", uint8(2))
	trusts := []Config{xffCfg(), fwdCfg(), {TrustedProxies: private10, Header: "X-Real-IP"}, {TrustedHops: 2, Header: "X-Forwarded-For"},
		{TrustedProxies: private10, Header: "X-Forwarded-For", TrustUnixSocket: true, Masquerade: MustParsePrefixSet("198.51.100.0/24")}}
	origins := []*OriginReader{nil, MustNewOriginReader(OriginConfig{Proto: "X-Forwarded-Proto", Host: "X-Forwarded-Host"}),
		MustNewOriginReader(OriginConfig{Proto: "Forwarded", Host: "Forwarded", AllowedHosts: []string{"a.example", "example.com"}})}
	remotes := []string{"10.0.0.1:4000", "203.0.113.9:5000", "[fd00::1]:1", "@", "[fe80::1%eth0]:1"}
	f.Fuzz(func(t *testing.T, line1, line2, conn, name, value string, sel uint8) {
		rcfg := trusts[int(sel)%len(trusts)]
		org := origins[int(sel/8)%len(origins)]
		remote := remotes[int(sel/32)%len(remotes)]
		cfg := ForwardConfig{Trust: MustNew(rcfg), XForwardedFor: sel&1 == 0, Forwarded: sel&2 == 0 || sel&1 != 0, Origin: org,
			XForwardedOrigin: org != nil && sel&4 != 0}
		fw, err := NewForwarder(cfg)
		require.NoError(t, err)

		// Every forwarding header a client could send, plus one of the
		// fuzzer's naming and the Connection header it chose.
		lines := []string{line1}
		if sel&0x80 != 0 {
			lines = append(lines, line2)
		}
		in := forwardRequest(remote, sel&0x40 != 0)
		for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "X_forwarded_for", "X-Forwarded-Proto", "X-Forwarded-Host"} {
			in.Header[h] = lines
		}
		in.Header["X-Forwarded-Proto"] = append(slices.Clone(lines), value)
		in.Header["Connection"] = []string{conn}
		if isToken(name) {
			in.Header[http.CanonicalHeaderKey(name)] = []string{value}
		}
		in.Host = value
		if remote == "@" {
			in = unixRequest(in)
		}

		out := in.Header.Clone()
		res, err := fw.Header(out, in)

		// The model: the reference walker's verdict and chain, the
		// reference origin.
		tr := Transport{}
		if ap, ok := parseRemoteAddr(remote); ok && remote != "@" {
			tr.Peer = ap
		}
		m := refResolve(rcfg, tr, in.Header)
		walkErr := err
		if ReasonOf(err) == ReasonNone {
			walkErr = nil // nil, or the origin's error after a walk that succeeded
		}
		require.Equal(t, m, modelOf(res, walkErr), "the walk")
		by := addr("192.0.2.1") // forwardRequest's local address; a Unix listener has none
		if remote == "@" {
			by = netip.Addr{}
		}
		want := http.Header{}
		if m.fail == ReasonNone {
			var o Origin
			oerr := error(nil)
			if org != nil {
				o, oerr = refOrigin(org.Config(), res, in.Header, in.TLS != nil, in.Host)
			}
			require.Equal(t, originKind(oerr), originKind(err), "the origin")
			if oerr == nil {
				want = refForwardHeaders(cfg, refChain(rcfg, tr, in.Header, m), by, o)
			} else {
				want = refUnknownHeaders(cfg, by)
			}
		} else {
			require.Error(t, err)
			if m.fail != ReasonAllTrusted {
				want = refUnknownHeaders(cfg, by)
			}
		}

		// What must be gone, what must be kept, what must be written.
		gone := map[string]bool{}
		for _, tok := range strings.Split(conn, ",") {
			if tok = strings.Trim(tok, " \t"); tok != "" && !slices.Contains([]string{"connection", "upgrade", "te"}, strings.ToLower(tok)) {
				gone[http.CanonicalHeaderKey(tok)] = true
			}
		}
		for k, v := range in.Header {
			switch {
			case documentedIsForwarding(k):
				// Only what the model writes.
			case gone[k]:
				assert.NotContains(t, out, k, "a header the client named in Connection")
			case k == "Connection":
			default:
				assert.Equal(t, v, out[k], "a header that is not a forwarding header: %s", k)
			}
		}
		for k, v := range out {
			if documentedIsForwarding(k) {
				require.Equal(t, want[k], v, "forwarding header %s; want all of %v", k, want)
			}
		}
		for k := range want {
			require.Contains(t, out, k)
		}
		for _, tok := range strings.Split(strings.Join(out["Connection"], ","), ",") {
			require.False(t, documentedIsForwarding(strings.Trim(tok, " \t")), "Connection names a forwarding header: %q", out["Connection"])
		}
	})
}

// BenchmarkForwarder is the rewrite of one request behind two trusted
// proxies: the forged headers removed, the chain written in both formats
// with the origin.
func BenchmarkForwarder(b *testing.B) {
	fw, err := NewForwarder(ForwardConfig{Trust: MustNew(xffCfg()), XForwardedFor: true, Forwarded: true, XForwardedOrigin: true,
		Origin: MustNewOriginReader(OriginConfig{Proto: "X-Forwarded-Proto", Host: "X-Forwarded-Host"})})
	require.NoError(b, err)
	in := forwardRequest("10.0.0.1:4000", false, append(slices.Clone(forgedForwarding), "X-Forwarded-For", "198.51.100.7, 10.0.0.2",
		"X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com", "Accept", "*/*", "User-Agent", "bench")...)
	b.ReportAllocs()
	for b.Loop() {
		out := in.Header.Clone()
		if _, err := fw.Header(out, in); err != nil {
			b.Fatal(err)
		}
	}
}
