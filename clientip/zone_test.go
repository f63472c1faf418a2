package clientip

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResolveZones pins the zone rules of zone.go: Go's httputil.ReverseProxy
// appends the host part of RemoteAddr to X-Forwarded-For, zone included, for
// a link-local IPv6 peer.
func TestResolveZones(t *testing.T) {
	linkLocal := MustParsePrefixSet("10.0.0.0/8, fe80::a/128")
	llCfg := Config{TrustedProxies: linkLocal, Header: "X-Forwarded-For"}
	xri := func(v string) http.Header { return http.Header{"X-Real-Ip": {v}} }
	xriCfg := Config{TrustedProxies: private10, Header: "X-Real-IP"}
	runResolveCases(t, []resolveCase{
		{name: "httputil.ReverseProxy's entry for a link-local peer: the zone is dropped from the client",
			cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%eth0"), want: "fe80::5", src: SourceXForwardedFor, hop: 1, via: "10.0.0.1"},
		{name: "a zoned trusted proxy is matched without its zone (fe80::a/128 trusts fe80::a%veth0)",
			cfg: llCfg, t: proxyPeer, h: xff("fe80::5%eth0, fe80::a%veth0"), want: "fe80::5", src: SourceXForwardedFor, hop: 2, via: "fe80::a"},
		{name: "bracketed with a port, as net.JoinHostPort writes it",
			cfg: xffCfg(), t: proxyPeer, h: xff("[fe80::5%eth0]:8080"), want: "fe80::5", src: SourceXForwardedFor, hop: 1},
		{name: "a decimal interface index is a zone", cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%3"), want: "fe80::5", src: SourceXForwardedFor, hop: 1},
		{name: "a zone of 15 bytes (IFNAMSIZ-1) is accepted",
			cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%br-0123456789ab"), want: "fe80::5", src: SourceXForwardedFor, hop: 1},
		{name: "every unreserved character (RFC 6874 §2) may appear in a zone",
			cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%a-Z.9_~"), want: "fe80::5", src: SourceXForwardedFor, hop: 1},
		{name: "%25 is not decoded: the zone is 25eth0, and the address is the same either way (RFC 6874 applies to URIs)",
			cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%25eth0"), want: "fe80::5", src: SourceXForwardedFor, hop: 1},
		{name: "a single-address header shares X-Forwarded-For's entry syntax, zone included",
			cfg: xriCfg, t: proxyPeer, h: xri("fe80::5%eth0"), want: "fe80::5", src: SourceHeader, hop: 1},
		{name: "a zoned peer of the trusted set (link-local fe80::/10 and its zone) is trusted",
			cfg: Config{TrustedProxies: MustParsePrefixSet("fe80::/10"), Header: "X-Forwarded-For"}, t: Transport{Peer: ap("[fe80::a%eth0]:1")},
			h: xff("198.51.100.7, fe80::b%eth0"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 2, via: "fe80::b"},

		{name: "malformed: an empty zone", cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: a zone of 16 bytes", cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%br-0123456789abc"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: a second % in the zone", cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%eth0%1"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: a space in the zone", cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%eth 0"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: a control byte in the zone", cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%eth\x000"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: a slash in the zone (not an interface name)", cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%a/b"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: a zone on a global address (RFC 4007 §6: zones are for non-global scopes)",
			cfg: xffCfg(), t: proxyPeer, h: xff("2001:db8::7%eth0"), hop: 1, wantErr: ErrMalformed},
		{name: "spoof: a zone cannot smuggle a trusted unique-local alias", cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7, fd00::2%eth0"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: a zone on an IPv4-mapped link-local address", cfg: xffCfg(), t: proxyPeer, h: xff("::ffff:169.254.0.1%eth0"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: a zone on IPv4", cfg: xffCfg(), t: proxyPeer, h: xff("169.254.0.1%eth0"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: a zone after the bracket", cfg: xffCfg(), t: proxyPeer, h: xff("[fe80::5]%eth0"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: an unclosed bracket with a zone", cfg: xffCfg(), t: proxyPeer, h: xff("[fe80::5%eth0"), hop: 1, wantErr: ErrMalformed},
		{name: "a zoned entry beyond the client is never read", cfg: xffCfg(), t: proxyPeer, h: xff("fe80::5%eth 0, 198.51.100.7"),
			want: "198.51.100.7", src: SourceXForwardedFor, hop: 1},

		{name: "Forwarded: a zone in a node stays malformed (RFC 7239 §6 nodename has no zone; RFC 6874 extends only URIs)",
			cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="[fe80::5%eth0]"`), hop: 1, wantErr: ErrMalformed},
		{name: "Forwarded: the URI form %25 too", cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="[fe80::5%25eth0]:80"`), hop: 1, wantErr: ErrMalformed},
	})
}

// TestZoneAllocs keeps the zoned path as free of allocations as the rest of
// the walk.
func TestZoneAllocs(t *testing.T) {
	r := MustNew(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/8, fe80::a/128"), Header: "X-Forwarded-For"})
	h := xff("fe80::5%eth0, [fe80::a%veth-origin0]:80")
	res, err := r.Resolve(proxyPeer, h)
	require.NoError(t, err)
	require.Equal(t, addr("fe80::5"), res.Client)
	assert.Zero(t, testing.AllocsPerRun(100, func() { r.Resolve(proxyPeer, h) }))
}

func TestValidZone(t *testing.T) {
	for _, z := range []string{"eth0", "3", "veth-origin0", strings.Repeat("x", maxZoneLen), "a.b_c~d-e"} {
		assert.True(t, validZone(z), z)
	}
	for _, z := range []string{"", strings.Repeat("x", maxZoneLen+1), "eth 0", "eth0%", "a/b", "a:b", "[a]", "é", "a\tb"} {
		assert.False(t, validZone(z), "%q", z)
	}
}

// BenchmarkResolveZone is xff3v6 as two httputil.ReverseProxy hops over
// link-local IPv6 write it, zones included.
func BenchmarkResolveZone(b *testing.B) {
	r := MustNew(Config{TrustedProxies: MustParsePrefixSet("fd00::/8, fe80::/10"), Header: "X-Forwarded-For"})
	t := Transport{Peer: ap("[fd00::1]:40000")}
	h := xff("2001:db8:85a3::8a2e:370:7334, fe80::2%veth-origin0, fe80::3%eth0")
	if res, err := r.Resolve(t, h); err != nil || res.Client != addr("2001:db8:85a3::8a2e:370:7334") {
		b.Fatalf("got %v, %v", res, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Resolve(t, h)
	}
}

// TestRemoteAddrZone: a RemoteAddr's zone is a socket peer's interface name
// or index, and anything else makes the peer unreadable (ErrNoAddress). netip
// takes any zone, so a RemoteAddr that other middleware rewrote from a header
// carried a client's terminal escapes or a megabyte zone into the Result,
// explain's reports and logs (found by the explain review, 2026-12-03).
func TestRemoteAddrZone(t *testing.T) {
	r := MustNew(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/8")})
	for _, tc := range []struct{ remote, want string }{
		{"[fe80::5%eth0]:80", "fe80::5%eth0"},
		{"[fe80::5%3]:80", "fe80::5%3"},
		{"[fe80::5%tun+1]:80", "fe80::5%tun+1"}, // Linux names may hold '+'
		{"fe80::5%br-0123456789ab", "fe80::5%br-0123456789ab"},
		{"[fe80::5%\x1b[2J]:80", ""},
		{"[fe80::5%eth 0]:80", ""},
		{"[fe80::5%a/b]:80", ""},
		{"[fe80::5%\xd1\x80]:80", ""},
		{"[fe80::5%" + strings.Repeat("x", 16) + "]:80", ""},
		{"fe80::5%" + strings.Repeat("x", 1<<20), ""},
	} {
		req := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
		res, err := r.ResolveRequest(req)
		if tc.want == "" {
			assert.ErrorIs(t, err, ErrNoAddress, "%.40q", tc.remote)
			assert.False(t, res.Peer.IsValid(), "%.40q", tc.remote)
			continue
		}
		if assert.NoError(t, err, tc.remote) {
			assert.Equal(t, tc.want, res.Peer.Addr().String(), tc.remote)
			assert.Equal(t, tc.want[:strings.IndexByte(tc.want, '%')], res.Client.String(), "the client never carries a zone: %s", tc.remote)
		}
	}
}
