package clientip

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	private10 = MustParsePrefixSet("10.0.0.0/8, fd00::/8")
	lbSet     = MustParsePrefixSet("192.0.2.10/31")
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
func addr(s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	return netip.MustParseAddr(s)
}

type resolveCase struct {
	name    string
	cfg     Config
	t       Transport
	h       http.Header
	want    string // client address; "" when none
	src     Source
	hop     int
	via     string
	wantErr error
}

func xffCfg() Config              { return Config{TrustedProxies: private10, Header: "X-Forwarded-For"} }
func fwdCfg() Config              { return Config{TrustedProxies: private10, Header: "Forwarded"} }
func xff(v ...string) http.Header { return http.Header{"X-Forwarded-For": v} }
func fwd(v ...string) http.Header { return http.Header{"Forwarded": v} }

var proxyPeer = Transport{Peer: ap("10.0.0.1:40000")}

func runResolveCases(t *testing.T, tests []resolveCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(tc.cfg)
			require.NoError(t, err)
			res, err := r.Resolve(tc.t, tc.h)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr, "result %v", res)
				if !errors.Is(tc.wantErr, ErrMasqueraded) {
					assert.False(t, res.Client.IsValid(), "failed result names a client: %v", res)
				}
				walked := errors.Is(tc.wantErr, ErrAllTrusted) || errors.Is(tc.wantErr, ErrTooFewHops) || errors.Is(tc.wantErr, ErrMasqueraded)
				if !walked {
					assert.False(t, res.Via.IsValid(), "failed result has Via: %v", res)
				}
			} else {
				require.NoError(t, err, "result %v", res)
			}
			assert.Equal(t, addr(tc.want), res.Client, "client")
			if tc.want != "" {
				assert.Equal(t, tc.src, res.Source, "source")
			}
			assert.Equal(t, tc.hop, res.Hop, "hop")
			if tc.via != "" {
				assert.Equal(t, addr(tc.via), res.Via, "via")
			}
			assert.Equal(t, tc.t.Peer, res.Peer, "socket layer")
			assert.Equal(t, tc.t.Proxy, res.Proxy, "PROXY layer")
			assert.Equal(t, refResolve(tc.cfg, tc.t, tc.h), modelOf(res, err), "the reference walker disagrees")
		})
	}
}

// modelOf is a Result and its error in the reference walker's terms.
func modelOf(res Result, err error) refResult {
	return refResult{client: res.Client, source: res.Source, hop: res.Hop, via: res.Via, header: res.Header, fail: failureOf(err)}
}

func TestResolveSocketAndProxy(t *testing.T) {
	runResolveCases(t, []resolveCase{
		{name: "zero config: the socket peer is the client",
			t: Transport{Peer: ap("203.0.113.9:51234")}, want: "203.0.113.9", src: SourceSocket},
		{name: "zero config ignores every header (direct client forging XFF)",
			t: Transport{Peer: ap("203.0.113.9:51234")}, h: xff("127.0.0.1"), want: "203.0.113.9", src: SourceSocket},
		{name: "zero config ignores a PROXY source (never believed from an untrusted peer)",
			t: Transport{Peer: ap("203.0.113.9:51234"), Proxy: ap("198.51.100.1:1")}, want: "203.0.113.9", src: SourceSocket},
		{name: "dual-stack socket peer is unmapped (::ffff:a.b.c.d)",
			t: Transport{Peer: ap("[::ffff:203.0.113.9]:51234")}, want: "203.0.113.9", src: SourceSocket},
		{name: "mapped peer inside a v4 trusted range is trusted (no alias past 10.0.0.0/8)",
			cfg: xffCfg(), t: Transport{Peer: ap("[::ffff:10.0.0.1]:4000")}, h: xff("198.51.100.7"),
			want: "198.51.100.7", src: SourceXForwardedFor, hop: 1, via: "10.0.0.1"},
		{name: "zoned link-local peer: the zone is not part of the answer",
			t: Transport{Peer: ap("[fe80::1%eth0]:4000")}, want: "fe80::1", src: SourceSocket},
		{name: "unix socket peer, not trusted: ErrNoAddress",
			cfg: Config{}, t: Transport{}, wantErr: ErrNoAddress},
		{name: "unix socket peer, trusted: the header is read",
			cfg: Config{TrustUnixSocket: true, Header: "X-Forwarded-For"}, t: Transport{}, h: xff("198.51.100.7"),
			want: "198.51.100.7", src: SourceXForwardedFor, hop: 1},
		{name: "unix socket peer, trusted, no header: every hop trusted",
			cfg: Config{TrustUnixSocket: true, Header: "X-Forwarded-For"}, t: Transport{}, wantErr: ErrAllTrusted},
		{name: "PROXY from a trusted load balancer: source = PROXY protocol, LB kept as the socket layer",
			cfg: Config{TrustedProxies: lbSet}, t: Transport{Peer: ap("192.0.2.10:33000"), Proxy: ap("198.51.100.77:52311")},
			want: "198.51.100.77", src: SourceProxyProtocol, hop: 1, via: "192.0.2.10"},
		{name: "PROXY source that is IPv4-mapped is unmapped",
			cfg: Config{TrustedProxies: lbSet}, t: Transport{Peer: ap("192.0.2.10:33000"), Proxy: ap("[::ffff:198.51.100.77]:52311")},
			want: "198.51.100.77", src: SourceProxyProtocol, hop: 1},
		{name: "PROXY source 0.0.0.0 is never a client",
			cfg: Config{TrustedProxies: lbSet}, t: Transport{Peer: ap("192.0.2.10:33000"), Proxy: ap("0.0.0.0:1")},
			hop: 1, wantErr: ErrUnspecified},
		{name: "trusted LB without a PROXY header and no header configured: every hop trusted",
			cfg: Config{TrustedProxies: lbSet}, t: Transport{Peer: ap("192.0.2.10:33000")}, wantErr: ErrAllTrusted, via: "192.0.2.10"},
		{name: "PROXY source is itself a trusted proxy: headers it delivered are read",
			cfg: Config{TrustedProxies: lbSet.Union(private10), Header: "X-Forwarded-For"},
			t:   Transport{Peer: ap("192.0.2.10:33000"), Proxy: ap("10.9.9.9:4000")}, h: xff("6.6.6.6, 198.51.100.7"),
			want: "198.51.100.7", src: SourceXForwardedFor, hop: 2, via: "10.9.9.9"},
		{name: "socket peer 0.0.0.0 is never a client",
			t: Transport{Peer: ap("0.0.0.0:1")}, wantErr: ErrUnspecified},
	})
}

func TestResolveXForwardedFor(t *testing.T) {
	runResolveCases(t, []resolveCase{
		{name: "rightmost untrusted entry is the client",
			cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 1, via: "10.0.0.1"},
		{name: "spoof: forged entries at the left are never used (GHSA-3fxj-6jh8-hvhx, leftmost XFF)",
			cfg: xffCfg(), t: proxyPeer, h: xff("127.0.0.1, 6.6.6.6, 198.51.100.7"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 1},
		{name: "spoof: a direct client's headers are ignored (GHSA-rjr7-jggh-pgcp, XFF from anyone)",
			cfg: xffCfg(), t: Transport{Peer: ap("203.0.113.9:1")}, h: xff("127.0.0.1"), want: "203.0.113.9", src: SourceSocket},
		{name: "walks over trusted proxies (two trusted hops in the header)",
			cfg: xffCfg(), t: proxyPeer, h: xff("6.6.6.6, 198.51.100.7, 10.0.0.2, 10.0.0.3"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 3, via: "10.0.0.2"},
		{name: "repeated header lines are one list in order (gin #4472: later lines are nearer)",
			cfg: xffCfg(), t: proxyPeer, h: xff("6.6.6.6, 198.51.100.7", "10.0.0.2"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 2},
		{name: "spoof: a forged second line cannot be taken for the proxy's (first line walked last)",
			cfg: xffCfg(), t: proxyPeer, h: xff("6.6.6.6", "198.51.100.7"), want: "198.51.100.7", hop: 1, src: SourceXForwardedFor},
		{name: "empty elements and OWS (spaces, tabs) are skipped (RFC 9110 §5.6.1)",
			cfg: xffCfg(), t: proxyPeer, h: xff(" ,\t198.51.100.7\t , ,, 10.0.0.2 ,"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 2},
		{name: "entry with a port", cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7:8080"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 1},
		{name: "bracketed IPv6", cfg: xffCfg(), t: proxyPeer, h: xff("[2001:db8::7]"), want: "2001:db8::7", src: SourceXForwardedFor, hop: 1},
		{name: "bracketed IPv6 with port", cfg: xffCfg(), t: proxyPeer, h: xff("[2001:db8::7]:443"), want: "2001:db8::7", src: SourceXForwardedFor, hop: 1},
		{name: "bare IPv6", cfg: xffCfg(), t: proxyPeer, h: xff("2001:db8::7"), want: "2001:db8::7", src: SourceXForwardedFor, hop: 1},
		{name: "IPv6 client behind IPv6 proxies", cfg: xffCfg(), t: Transport{Peer: ap("[fd00::1]:1")},
			h: xff("2001:db8::7, fd00::2"), want: "2001:db8::7", src: SourceXForwardedFor, hop: 2, via: "fd00::2"},
		{name: "output is canonical: IPv4-mapped entry unmapped",
			cfg: xffCfg(), t: proxyPeer, h: xff("::ffff:198.51.100.7"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 1},
		{name: "spoof: mapped alias of a trusted proxy is trusted too (chi Unmap fix)",
			cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7, ::ffff:10.0.0.2"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 2},
		{name: "a zone on an address that is not link-local is malformed (no kernel reports one; see TestResolveZones)",
			cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7, fd00::2%eth0"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: garbage where the walk needs an address (never skipped, fiber/Caddy bug class)",
			cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7, not-an-ip"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed entry beyond the client is never read",
			cfg: xffCfg(), t: proxyPeer, h: xff("not-an-ip, 198.51.100.7"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 1},
		{name: "malformed: leading-zero octets (octal ambiguity)", cfg: xffCfg(), t: proxyPeer, h: xff("010.0.0.1"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: hex IPv4", cfg: xffCfg(), t: proxyPeer, h: xff("0x0a.0.0.1"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: CIDR", cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.0/24"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: host name", cfg: xffCfg(), t: proxyPeer, h: xff("evil.example"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: control byte", cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7\x00"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: short IPv4", cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: octet above 255", cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.256"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: bracketed IPv4", cfg: xffCfg(), t: proxyPeer, h: xff("[198.51.100.7]"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: empty port", cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7:"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: port above 65535", cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7:65536"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: non-numeric port", cfg: xffCfg(), t: proxyPeer, h: xff("198.51.100.7:nope"), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: quoted entry", cfg: xffCfg(), t: proxyPeer, h: xff(`"198.51.100.7"`), hop: 1, wantErr: ErrMalformed},
		{name: "malformed: two addresses separated by a space (nginx splits on spaces; we do not)",
			cfg: xffCfg(), t: proxyPeer, h: xff("6.6.6.6 198.51.100.7"), hop: 1, wantErr: ErrMalformed},
		{name: "unspecified 0.0.0.0 is never a client", cfg: xffCfg(), t: proxyPeer, h: xff("0.0.0.0"), hop: 1, wantErr: ErrUnspecified},
		{name: "unspecified :: is never a client", cfg: xffCfg(), t: proxyPeer, h: xff("::"), hop: 1, wantErr: ErrUnspecified},
		{name: "unspecified mapped ::ffff:0.0.0.0 is never a client", cfg: xffCfg(), t: proxyPeer, h: xff("::ffff:0.0.0.0"), hop: 1, wantErr: ErrUnspecified},
		{name: "unspecified mapped in hex ::ffff:0:0 is never a client (FuzzXFF)", cfg: xffCfg(), t: proxyPeer, h: xff("::ffff:0:0"), hop: 1, wantErr: ErrUnspecified},
		{name: "unspecified mapped in hex after a trusted IPv6 hop", cfg: xffCfg(), t: proxyPeer, h: xff("::ffff:0:0, fd00::2"), hop: 2, wantErr: ErrUnspecified},
		{name: "every hop trusted: ErrAllTrusted, never the leftmost (internal spoofer in the trusted range)",
			cfg: xffCfg(), t: proxyPeer, h: xff("10.0.0.9, 10.0.0.2"), hop: 2, via: "10.0.0.9", wantErr: ErrAllTrusted},
		{name: "trusted peer without the header: every hop trusted, the peer is not passed off as the client",
			cfg: xffCfg(), t: proxyPeer, hop: 0, via: "10.0.0.1", wantErr: ErrAllTrusted},
		{name: "header present but empty: every hop trusted", cfg: xffCfg(), t: proxyPeer, h: xff(""), wantErr: ErrAllTrusted},
		{name: "only the configured header is read (Forwarded ignored when X-Forwarded-For is configured)",
			cfg: xffCfg(), t: proxyPeer, h: http.Header{"Forwarded": {"for=198.51.100.7"}, "X-Real-Ip": {"198.51.100.8"}},
			wantErr: ErrAllTrusted},
	})
}

func TestResolveHopCount(t *testing.T) {
	runResolveCases(t, []resolveCase{
		{name: "one trusted hop: the client is what the proxy wrote",
			cfg: Config{TrustedHops: 1, Header: "X-Forwarded-For"}, t: Transport{Peer: ap("203.0.113.1:1")},
			h: xff("6.6.6.6, 198.51.100.7"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 1, via: "203.0.113.1"},
		{name: "two trusted hops: addresses inside the count are not checked",
			cfg: Config{TrustedHops: 2, Header: "X-Forwarded-For"}, t: Transport{Peer: ap("203.0.113.1:1")},
			h: xff("6.6.6.6, 198.51.100.7, 203.0.113.2"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 2},
		{name: "too few hops: ErrTooFewHops, never the leftmost",
			cfg: Config{TrustedHops: 3, Header: "X-Forwarded-For"}, t: Transport{Peer: ap("203.0.113.1:1")},
			h: xff("198.51.100.7, 203.0.113.2"), hop: 2, wantErr: ErrTooFewHops},
		{name: "with ranges, a peer outside them is the client and its headers are ignored",
			cfg: Config{TrustedHops: 1, TrustedProxies: private10, Header: "X-Forwarded-For"}, t: Transport{Peer: ap("203.0.113.9:1")},
			h: xff("127.0.0.1"), want: "203.0.113.9", src: SourceSocket},
		{name: "with ranges, a trusted peer's header is counted",
			cfg: Config{TrustedHops: 1, TrustedProxies: private10, Header: "X-Forwarded-For"}, t: proxyPeer,
			h: xff("6.6.6.6, 198.51.100.7"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 1},
		{name: "the PROXY source counts as a hop",
			cfg: Config{TrustedHops: 2, Header: "X-Forwarded-For"}, t: Transport{Peer: ap("192.0.2.10:1"), Proxy: ap("203.0.113.5:2")},
			h: xff("6.6.6.6, 198.51.100.7"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 2, via: "203.0.113.5"},
		{name: "one hop behind a PROXY load balancer is the PROXY source",
			cfg: Config{TrustedHops: 1}, t: Transport{Peer: ap("192.0.2.10:1"), Proxy: ap("198.51.100.7:2")},
			want: "198.51.100.7", src: SourceProxyProtocol, hop: 1},
		{name: "malformed entry inside the count stops the walk",
			cfg: Config{TrustedHops: 2, Header: "X-Forwarded-For"}, t: Transport{Peer: ap("203.0.113.1:1")},
			h: xff("198.51.100.7, garbage"), hop: 1, wantErr: ErrMalformed},
	})
}

func TestResolveForwarded(t *testing.T) {
	runResolveCases(t, []resolveCase{
		{name: "RFC 7239 §4 example: for=192.0.2.60;proto=http;by=203.0.113.43",
			cfg: fwdCfg(), t: proxyPeer, h: fwd("for=192.0.2.60;proto=http;by=203.0.113.43"), want: "192.0.2.60", src: SourceForwarded, hop: 1},
		{name: "RFC 7239 §7.4: quoted, bracketed IPv6 with port",
			cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="[2001:db8:cafe::17]:4711"`), want: "2001:db8:cafe::17", src: SourceForwarded, hop: 1},
		{name: "quoted, bracketed IPv6 without port",
			cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="[2001:db8:cafe::17]"`), want: "2001:db8:cafe::17", src: SourceForwarded, hop: 1},
		{name: "quoted IPv4 with port", cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="192.0.2.60:8080"`), want: "192.0.2.60", src: SourceForwarded, hop: 1},
		{name: "obfuscated port is allowed (RFC 7239 §6.3)", cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="192.0.2.60:_p1"`), want: "192.0.2.60", src: SourceForwarded, hop: 1},
		{name: "parameter names are case-insensitive (RFC 7239 §4)", cfg: fwdCfg(), t: proxyPeer, h: fwd("For=192.0.2.60;PROTO=https"), want: "192.0.2.60", src: SourceForwarded, hop: 1},
		{name: "walks elements from the right over trusted proxies",
			cfg: fwdCfg(), t: proxyPeer, h: fwd("for=6.6.6.6, for=192.0.2.60;proto=https, for=10.0.0.2, for=\"[fd00::3]:80\""),
			want: "192.0.2.60", src: SourceForwarded, hop: 3, via: "10.0.0.2"},
		{name: "repeated Forwarded lines are one list", cfg: fwdCfg(), t: proxyPeer, h: fwd("for=192.0.2.60", "for=10.0.0.2"),
			want: "192.0.2.60", src: SourceForwarded, hop: 2},
		{name: "comma inside a quoted string does not split elements (RCI deviation 1)",
			cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="1.1.1.1, for=2.2.2.2", for=10.0.0.2`), hop: 2, wantErr: ErrMalformed},
		{name: "comma inside quotes: the element is read whole, its value is not a node",
			cfg: fwdCfg(), t: proxyPeer, h: fwd(`for=192.0.2.60;x="a,b"`), want: "192.0.2.60", src: SourceForwarded, hop: 1},
		{name: "unterminated quote makes the whole header malformed (RCI deviation 2)",
			cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="1.1.1.1, for=192.0.2.60`), hop: 1, wantErr: ErrMalformed},
		{name: "spoof: a client's open quote cannot swallow the proxy's element into a value",
			cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="6.6.6.6`, `for=192.0.2.60`), hop: 1, wantErr: ErrMalformed},
		{name: "bad parameter syntax makes the element invalid (RCI deviation 3)",
			cfg: fwdCfg(), t: proxyPeer, h: fwd("for=1.1.1.1;@!=x, for=10.0.0.2"), hop: 2, wantErr: ErrMalformed},
		{name: "duplicated parameter makes the element invalid (RFC 7239 §4, RCI deviation 4)",
			cfg: fwdCfg(), t: proxyPeer, h: fwd("for=1.1.1.1;For=2.2.2.2, for=10.0.0.2"), hop: 2, wantErr: ErrMalformed},
		{name: "duplicated non-for parameter also invalidates the element",
			cfg: fwdCfg(), t: proxyPeer, h: fwd("for=192.0.2.60;proto=http;proto=https"), hop: 1, wantErr: ErrMalformed},
		{name: "quoted-pair is unescaped (RCI deviation 5)", cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="192.0.2.\60"`), want: "192.0.2.60", src: SourceForwarded, hop: 1},
		{name: "white space around = is invalid (RCI deviation 6)", cfg: fwdCfg(), t: proxyPeer, h: fwd("for =192.0.2.60"), hop: 1, wantErr: ErrMalformed},
		{name: "white space after = is invalid", cfg: fwdCfg(), t: proxyPeer, h: fwd("for= 192.0.2.60"), hop: 1, wantErr: ErrMalformed},
		{name: "white space around ; is tolerated", cfg: fwdCfg(), t: proxyPeer, h: fwd("proto=https ; for=192.0.2.60"), want: "192.0.2.60", src: SourceForwarded, hop: 1},
		{name: "unquoted IPv6 is invalid: ':' and '[' are not token characters (RCI deviation 7)",
			cfg: fwdCfg(), t: proxyPeer, h: fwd("for=[2001:db8::1]"), hop: 1, wantErr: ErrMalformed},
		{name: "IPv6 without brackets is invalid (RCI deviation 8)", cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="2001:db8::1"`), hop: 1, wantErr: ErrMalformed},
		{name: "bracketed IPv4 is invalid (RCI deviation 9)", cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="[1.1.1.1]"`), hop: 1, wantErr: ErrMalformed},
		{name: "unquoted port is invalid", cfg: fwdCfg(), t: proxyPeer, h: fwd("for=192.0.2.60:80"), hop: 1, wantErr: ErrMalformed},
		{name: "for=unknown stops the walk (RFC 7239 §6.2)", cfg: fwdCfg(), t: proxyPeer, h: fwd("for=192.0.2.60, for=unknown"), hop: 1, wantErr: ErrUnknownHop},
		{name: "for=UNKNOWN in any case", cfg: fwdCfg(), t: proxyPeer, h: fwd("for=UNKNOWN"), hop: 1, wantErr: ErrUnknownHop},
		{name: "spoof: an obfuscated node stops the walk, the entry behind it is never used (RFC 7239 §6.3)",
			cfg: fwdCfg(), t: proxyPeer, h: fwd("for=6.6.6.6, for=_hidden"), hop: 1, wantErr: ErrUnknownHop},
		{name: "obfuscated node with bad characters is malformed", cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="_a%b"`), hop: 1, wantErr: ErrMalformed},
		{name: "element without for= is a hop of unknown address", cfg: fwdCfg(), t: proxyPeer, h: fwd("proto=https;by=10.0.0.1"), hop: 1, wantErr: ErrUnknownHop},
		{name: "zone in a node is malformed", cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="[fe80::1%25eth0]"`), hop: 1, wantErr: ErrMalformed},
		{name: "empty elements are skipped", cfg: fwdCfg(), t: proxyPeer, h: fwd(" , for=192.0.2.60 ,, "), want: "192.0.2.60", src: SourceForwarded, hop: 1},
		{name: "for=0.0.0.0 is never a client", cfg: fwdCfg(), t: proxyPeer, h: fwd("for=0.0.0.0"), hop: 1, wantErr: ErrUnspecified},
		{name: "mapped node unmapped", cfg: fwdCfg(), t: proxyPeer, h: fwd(`for="[::ffff:192.0.2.60]"`), want: "192.0.2.60", src: SourceForwarded, hop: 1},
		{name: "only Forwarded is read: a forged X-Forwarded-For is ignored (Rack priority bug class)",
			cfg: fwdCfg(), t: proxyPeer, h: http.Header{"Forwarded": {"for=192.0.2.60"}, "X-Forwarded-For": {"6.6.6.6"}},
			want: "192.0.2.60", src: SourceForwarded, hop: 1},
	})
}

func TestResolveSingleHeader(t *testing.T) {
	cf := Config{TrustedProxies: private10, Header: "cf-connecting-ip"}
	runResolveCases(t, []resolveCase{
		{name: "believed from a trusted peer", cfg: cf, t: proxyPeer, h: http.Header{"Cf-Connecting-Ip": {"198.51.100.7"}},
			want: "198.51.100.7", src: SourceHeader, hop: 1},
		{name: "spoof: ignored from a direct client (gin TrustedPlatform bug, echo v5 X-Real-IP)", cfg: cf,
			t: Transport{Peer: ap("203.0.113.9:1")}, h: http.Header{"Cf-Connecting-Ip": {"127.0.0.1"}}, want: "203.0.113.9", src: SourceSocket},
		{name: "two instances: ErrMultipleValues (GHSA-gcfq-8gqf-4876, Header.Add put the client's value first)", cfg: cf, t: proxyPeer,
			h: http.Header{"Cf-Connecting-Ip": {"6.6.6.6", "198.51.100.7"}}, hop: 1, wantErr: ErrMultipleValues},
		{name: "a list in a single-address header: ErrMultipleValues", cfg: cf, t: proxyPeer,
			h: http.Header{"Cf-Connecting-Ip": {"6.6.6.6, 198.51.100.7"}}, hop: 1, wantErr: ErrMultipleValues},
		{name: "empty value is malformed", cfg: cf, t: proxyPeer, h: http.Header{"Cf-Connecting-Ip": {" "}}, hop: 1, wantErr: ErrMalformed},
		{name: "garbage is malformed", cfg: cf, t: proxyPeer, h: http.Header{"Cf-Connecting-Ip": {"nope"}}, hop: 1, wantErr: ErrMalformed},
		{name: "absent header behind a trusted peer: every hop trusted", cfg: cf, t: proxyPeer, wantErr: ErrAllTrusted},
		{name: "a value inside the trusted set: every hop trusted", cfg: cf, t: proxyPeer, h: http.Header{"Cf-Connecting-Ip": {"10.0.0.9"}}, hop: 1, wantErr: ErrAllTrusted},
		{name: "other forwarding headers are never read", cfg: cf, t: proxyPeer, h: xff("198.51.100.7"), wantErr: ErrAllTrusted},
		{name: "IPv6 with OWS", cfg: cf, t: proxyPeer, h: http.Header{"Cf-Connecting-Ip": {"\t2001:db8::7 "}}, want: "2001:db8::7", src: SourceHeader, hop: 1},
	})
}

func TestResolveMasquerade(t *testing.T) {
	nodes := MustParsePrefixSet("192.0.2.0/28")
	runResolveCases(t, []resolveCase{
		{name: "externalTrafficPolicy: Cluster — the socket peer is a node: flagged with ErrMasqueraded",
			cfg: Config{Masquerade: nodes}, t: Transport{Peer: ap("192.0.2.3:61000")}, want: "192.0.2.3", src: SourceSocket, wantErr: ErrMasqueraded},
		{name: "a client outside the node set is not flagged",
			cfg: Config{Masquerade: nodes}, t: Transport{Peer: ap("198.51.100.7:61000")}, want: "198.51.100.7", src: SourceSocket},
		{name: "trusted node without a PROXY header (Cluster + PROXY, in-cluster caller): ErrMasqueraded, not ErrAllTrusted",
			cfg: Config{TrustedProxies: nodes, Masquerade: nodes}, t: Transport{Peer: ap("192.0.2.3:61000")},
			want: "192.0.2.3", src: SourceSocket, wantErr: ErrMasqueraded},
		{name: "trusted node with a PROXY header: the PROXY source is the client",
			cfg: Config{TrustedProxies: nodes, Masquerade: nodes}, t: Transport{Peer: ap("192.0.2.3:61000"), Proxy: ap("198.51.100.7:5")},
			want: "198.51.100.7", src: SourceProxyProtocol, hop: 1, via: "192.0.2.3"},
		{name: "a header-derived result on a node address is flagged too",
			cfg: Config{TrustedProxies: private10, Header: "X-Forwarded-For", Masquerade: nodes}, t: proxyPeer,
			h: xff("192.0.2.4"), want: "192.0.2.4", src: SourceXForwardedFor, hop: 1, wantErr: ErrMasqueraded},
	})
}

func TestResolveLimits(t *testing.T) {
	many := strings.TrimSuffix(strings.Repeat("10.1.2.3, ", 10000), ", ")
	runResolveCases(t, []resolveCase{
		{name: "10,000 trusted entries: ErrTooManyHops after MaxHops",
			cfg: Config{TrustedProxies: private10, Header: "X-Forwarded-For", MaxHeaderBytes: 1 << 20}, t: proxyPeer,
			h: xff(many), hop: DefaultMaxHops + 1, wantErr: ErrTooManyHops},
		{name: "100 KB of garbage: ErrHeaderTooLarge before parsing",
			cfg: xffCfg(), t: proxyPeer, h: xff(strings.Repeat("x", 100<<10)), hop: 1, wantErr: ErrHeaderTooLarge},
		{name: "many empty lines count against the byte budget",
			cfg: xffCfg(), t: proxyPeer, h: xff(make([]string, DefaultMaxHeaderBytes+1)...), hop: 1, wantErr: ErrHeaderTooLarge},
		{name: "MaxHops counts the PROXY hop",
			cfg: Config{TrustedProxies: private10, Header: "X-Forwarded-For", MaxHops: 2}, t: Transport{Peer: ap("10.0.0.1:1"), Proxy: ap("10.0.0.2:2")},
			h: xff("198.51.100.7, 10.0.0.3"), hop: 3, wantErr: ErrTooManyHops},
		{name: "a chain exactly MaxHops long resolves",
			cfg: Config{TrustedProxies: private10, Header: "X-Forwarded-For", MaxHops: 2}, t: proxyPeer,
			h: xff("198.51.100.7, 10.0.0.3"), want: "198.51.100.7", src: SourceXForwardedFor, hop: 2},
		{name: "Forwarded: too many elements",
			cfg: Config{TrustedProxies: private10, Header: "Forwarded", MaxHops: 3}, t: proxyPeer,
			h: fwd("for=198.51.100.7, for=10.0.0.1, for=10.0.0.2, for=10.0.0.3"), hop: 4, wantErr: ErrTooManyHops},
		{name: "Forwarded: more elements than the ring keeps, client near the right",
			cfg: Config{TrustedProxies: private10, Header: "Forwarded", MaxHeaderBytes: 1 << 20}, t: proxyPeer,
			h: fwd(strings.Repeat("for=6.6.6.6, ", 500) + "for=198.51.100.7, for=10.0.0.3"), want: "198.51.100.7", src: SourceForwarded, hop: 2},
		{name: "single header: MaxHops", cfg: Config{TrustedProxies: private10, Header: "X-Real-IP", MaxHops: 1},
			t: Transport{Peer: ap("10.0.0.1:1"), Proxy: ap("10.0.0.2:2")}, h: http.Header{"X-Real-Ip": {"198.51.100.7"}}, hop: 2, wantErr: ErrTooManyHops},
	})
}

// TestResolveDocumentedRules pins, with the whole Result, each rule the
// package documents where an independent reference walker written from the
// documentation once disagreed with the code (issue 17 §2).
func TestResolveDocumentedRules(t *testing.T) {
	T := private10
	peer := ap("10.0.0.1:40000")
	viaLB := Transport{Peer: peer, Proxy: ap("10.0.0.2:5000")}
	node9 := MustParsePrefixSet("10.0.0.9")
	params := func(n int) string { // a for= pair and n-1 more
		var b strings.Builder
		b.WriteString("for=192.0.2.1")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, ";p%d=v", i)
		}
		return b.String()
	}
	letters := func(n int) string { return strings.Repeat("x", n) }
	escaped := func(s string) string { // every byte as a quoted-pair
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
		return b.String()
	}
	xri := func(v ...string) http.Header { return http.Header{"X-Real-Ip": v} }
	tests := []struct {
		name    string
		cfg     Config
		t       Transport
		h       http.Header
		want    Result
		wantErr error
	}{
		// A Forwarded element may have at most 16 parameters: a documented
		// bound, since RFC 7239 sets none.
		{name: "Forwarded element with 16 parameters resolves", cfg: fwdCfg(), t: proxyPeer, h: fwd(params(16)),
			want: Result{Client: addr("192.0.2.1"), Via: peer.Addr(), Peer: peer, Header: "Forwarded", Hop: 1, Source: SourceForwarded}},
		{name: "Forwarded element with 17 parameters is ErrMalformed (documented bound; RFC 7239 sets none)", cfg: fwdCfg(), t: proxyPeer, h: fwd(params(17)),
			want: Result{Peer: peer, Header: "Forwarded", Hop: 1}, wantErr: ErrMalformed},
		{name: "a 17th parameter beyond the client is never read", cfg: fwdCfg(), t: proxyPeer, h: fwd(params(17), "for=198.51.100.7"),
			want: Result{Client: addr("198.51.100.7"), Via: peer.Addr(), Peer: peer, Header: "Forwarded", Hop: 1, Source: SourceForwarded}},

		// The kind of a node decides, not its length (RFC 7239 §6.3 sets no
		// length on obfuscated identifiers).
		{name: "obfuscated node of 127 letters is ErrUnknownHop", cfg: fwdCfg(), t: proxyPeer, h: fwd("for=_" + letters(127)),
			want: Result{Peer: peer, Header: "Forwarded", Hop: 1}, wantErr: ErrUnknownHop},
		{name: "obfuscated node of 128 letters is ErrUnknownHop too", cfg: fwdCfg(), t: proxyPeer, h: fwd("for=_" + letters(128)),
			want: Result{Peer: peer, Header: "Forwarded", Hop: 1}, wantErr: ErrUnknownHop},
		{name: "quoted obfuscated node of 1000 letters with an obfuscated port is ErrUnknownHop", cfg: fwdCfg(), t: proxyPeer,
			h: fwd(`for="_` + letters(1000) + `:_` + letters(1000) + `"`), want: Result{Peer: peer, Header: "Forwarded", Hop: 1}, wantErr: ErrUnknownHop},
		{name: "obfuscated node written as 200 quoted-pairs is ErrUnknownHop", cfg: fwdCfg(), t: proxyPeer,
			h: fwd(`for="` + escaped("_"+letters(199)) + `"`), want: Result{Peer: peer, Header: "Forwarded", Hop: 1}, wantErr: ErrUnknownHop},
		{name: "an address with a 200-byte obfuscated port resolves", cfg: fwdCfg(), t: proxyPeer,
			h:    fwd(`for="[2001:db8::7]:_` + letters(199) + `"`),
			want: Result{Client: addr("2001:db8::7"), Via: peer.Addr(), Peer: peer, Header: "Forwarded", Hop: 1, Source: SourceForwarded}},
		{name: "an address and a 200-byte obfuscated port, all quoted-pairs, resolves", cfg: fwdCfg(), t: proxyPeer,
			h:    fwd(`for="` + escaped("192.0.2.60:_"+letters(199)) + `"`),
			want: Result{Client: addr("192.0.2.60"), Via: peer.Addr(), Peer: peer, Header: "Forwarded", Hop: 1, Source: SourceForwarded}},
		{name: "a long node with a byte no identifier may hold is ErrMalformed", cfg: fwdCfg(), t: proxyPeer,
			h: fwd(`for="_` + letters(200) + `%"`), want: Result{Peer: peer, Header: "Forwarded", Hop: 1}, wantErr: ErrMalformed},
		{name: "a long escaped port that is not an identifier is ErrMalformed", cfg: fwdCfg(), t: proxyPeer,
			h: fwd(`for="` + escaped("192.0.2.60:"+letters(200)) + `"`), want: Result{Peer: peer, Header: "Forwarded", Hop: 1}, wantErr: ErrMalformed},

		// With ErrMasqueraded, Via is the hop that reported the node, as for
		// any client.
		{name: "masquerading PROXY source stepped over last: Via is the socket peer that reported it",
			cfg: Config{TrustedProxies: T, Masquerade: node9}, t: Transport{Peer: peer, Proxy: ap("10.0.0.9:5000")},
			want:    Result{Client: addr("10.0.0.9"), Via: peer.Addr(), Peer: peer, Proxy: ap("10.0.0.9:5000"), Hop: 1, Source: SourceProxyProtocol, Masqueraded: true},
			wantErr: ErrMasqueraded},
		{name: "masquerading leftmost X-Forwarded-For entry: Via is the entry that reported it",
			cfg: Config{TrustedProxies: T, Header: "X-Forwarded-For", Masquerade: node9}, t: proxyPeer, h: xff("10.0.0.9", " , 10.0.0.2,"),
			want:    Result{Client: addr("10.0.0.9"), Via: addr("10.0.0.2"), Peer: peer, Header: "X-Forwarded-For", Hop: 2, Source: SourceXForwardedFor, Masqueraded: true},
			wantErr: ErrMasqueraded},
		{name: "masquerading only X-Forwarded-For entry: Via is the socket peer",
			cfg: Config{TrustedProxies: T, Header: "X-Forwarded-For", Masquerade: node9}, t: proxyPeer, h: xff("10.0.0.9"),
			want:    Result{Client: addr("10.0.0.9"), Via: peer.Addr(), Peer: peer, Header: "X-Forwarded-For", Hop: 1, Source: SourceXForwardedFor, Masqueraded: true},
			wantErr: ErrMasqueraded},
		{name: "masquerading leftmost Forwarded element: Via is the element that reported it",
			cfg: Config{TrustedProxies: T, Header: "Forwarded", Masquerade: node9}, t: viaLB, h: fwd(`for="10.0.0.9:80";proto=https, for=10.0.0.3`),
			want:    Result{Client: addr("10.0.0.9"), Via: addr("10.0.0.3"), Peer: peer, Proxy: viaLB.Proxy, Header: "Forwarded", Hop: 3, Source: SourceForwarded, Masqueraded: true},
			wantErr: ErrMasqueraded},

		// Header names the header only when Hop is one of its entries; absent
		// and present but empty do not differ.
		{name: "masquerading PROXY source, header absent: no Header",
			cfg: Config{TrustedProxies: T, Header: "X-Forwarded-For", Masquerade: node9}, t: Transport{Peer: peer, Proxy: ap("10.0.0.9:5000")},
			want:    Result{Client: addr("10.0.0.9"), Via: peer.Addr(), Peer: peer, Proxy: ap("10.0.0.9:5000"), Hop: 1, Source: SourceProxyProtocol, Masqueraded: true},
			wantErr: ErrMasqueraded},
		{name: "masquerading PROXY source, header present but empty: no Header either",
			cfg: Config{TrustedProxies: T, Header: "X-Forwarded-For", Masquerade: node9}, t: Transport{Peer: peer, Proxy: ap("10.0.0.9:5000")}, h: xff(" , "),
			want:    Result{Client: addr("10.0.0.9"), Via: peer.Addr(), Peer: peer, Proxy: ap("10.0.0.9:5000"), Hop: 1, Source: SourceProxyProtocol, Masqueraded: true},
			wantErr: ErrMasqueraded},
		{name: "masquerading socket peer, Forwarded present but empty: no Header",
			cfg: Config{TrustedProxies: T, Header: "Forwarded", Masquerade: MustParsePrefixSet("10.0.0.1")}, t: proxyPeer, h: fwd(""),
			want: Result{Client: peer.Addr(), Peer: peer, Source: SourceSocket, Masqueraded: true}, wantErr: ErrMasqueraded},
		{name: "every hop trusted, header present but empty: no Header, as when absent",
			cfg: xffCfg(), t: proxyPeer, h: xff(""), want: Result{Via: peer.Addr(), Peer: peer}, wantErr: ErrAllTrusted},
		{name: "every hop trusted in the header: Header names it",
			cfg: xffCfg(), t: proxyPeer, h: xff("10.0.0.2"), want: Result{Via: addr("10.0.0.2"), Peer: peer, Header: "X-Forwarded-For", Hop: 1}, wantErr: ErrAllTrusted},

		// Which error wins: the header's shape, then each hop's position
		// against MaxHops, then its content, then trust.
		{name: "MaxHops reached by the PROXY source: an empty X-Real-IP is ErrTooManyHops",
			cfg: Config{TrustedProxies: T, Header: "X-Real-IP", MaxHops: 1}, t: viaLB, h: xri(""),
			want: Result{Peer: peer, Proxy: viaLB.Proxy, Header: "X-Real-Ip", Hop: 2}, wantErr: ErrTooManyHops},
		{name: "MaxHops reached by the PROXY source: a garbage X-Real-IP is ErrTooManyHops",
			cfg: Config{TrustedProxies: T, Header: "X-Real-IP", MaxHops: 1}, t: viaLB, h: xri("x"),
			want: Result{Peer: peer, Proxy: viaLB.Proxy, Header: "X-Real-Ip", Hop: 2}, wantErr: ErrTooManyHops},
		{name: "MaxHops reached by the PROXY source: a list in X-Real-IP is still ErrMultipleValues (the header's shape)",
			cfg: Config{TrustedProxies: T, Header: "X-Real-IP", MaxHops: 1}, t: viaLB, h: xri("6.6.6.6, 198.51.100.7"),
			want: Result{Peer: peer, Proxy: viaLB.Proxy, Header: "X-Real-Ip", Hop: 2}, wantErr: ErrMultipleValues},
		{name: "MaxHops reached by the PROXY source: a garbage X-Forwarded-For entry is ErrTooManyHops",
			cfg: Config{TrustedProxies: T, Header: "X-Forwarded-For", MaxHops: 1}, t: viaLB, h: xff("garbage"),
			want: Result{Peer: peer, Proxy: viaLB.Proxy, Header: "X-Forwarded-For", Hop: 2}, wantErr: ErrTooManyHops},
		{name: "MaxHops reached by the PROXY source: an unclosed Forwarded quote is ErrMalformed (the header's shape)",
			cfg: Config{TrustedProxies: T, Header: "Forwarded", MaxHops: 1}, t: viaLB, h: fwd(`for="198.51.100.7`),
			want: Result{Peer: peer, Proxy: viaLB.Proxy, Header: "Forwarded", Hop: 2}, wantErr: ErrMalformed},
		{name: "hop-count mode: a masquerading node stepped over last is ErrMasqueraded, not ErrTooFewHops",
			cfg: Config{TrustedHops: 2, Masquerade: MustParsePrefixSet("192.0.2.0/28")}, t: Transport{Peer: ap("192.0.2.3:61000")},
			want:    Result{Client: addr("192.0.2.3"), Peer: ap("192.0.2.3:61000"), Source: SourceSocket, Masqueraded: true},
			wantErr: ErrMasqueraded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := MustNew(tc.cfg).Resolve(tc.t, tc.h)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
			}
			assert.Equal(t, tc.want, res)
			assert.Equal(t, refResolve(tc.cfg, tc.t, tc.h), modelOf(res, err), "the reference walker disagrees")
		})
	}
}

func TestNewValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"header with nothing trusted would never be read", Config{Header: "X-Forwarded-For"}},
		{"invalid header name", Config{TrustedProxies: private10, Header: "X Forwarded"}},
		{"negative hops", Config{TrustedHops: -1}},
		{"hops above MaxHops", Config{TrustedHops: 5, MaxHops: 4}},
		{"MaxHops above the limit", Config{MaxHops: 65}},
		{"negative MaxHops", Config{MaxHops: -1}},
		{"negative MaxHeaderBytes", Config{MaxHeaderBytes: -1}},
		{"MaxHeaderBytes over 1 GiB (Forwarded positions are int32)", Config{MaxHeaderBytes: 1<<30 + 1}},
		// CloudFront writes "IP:port" with IPv6 unbracketed: "2001:db8::1:443"
		// would read as the address 2001:db8::1:443, a client it never was.
		{"CloudFront-Viewer-Address: IPv6 address and port cannot be told apart", Config{TrustedProxies: private10, Header: "cloudfront-viewer-address"}},
		// Trusting every address (gin's default) names no client and
		// hands Via the leftmost entry, which the client wrote.
		{"TrustedProxies 0.0.0.0/0 trusts every IPv4 hop", Config{TrustedProxies: MustParsePrefixSet("0.0.0.0/0"), Header: "X-Forwarded-For"}},
		{"TrustedProxies ::/0 beside a real range trusts every IPv6 hop", Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/8, ::/0")}},
		{"TrustedProxies ::ffff:0:0/96 is 0.0.0.0/0 written in IPv6", Config{TrustedProxies: MustParsePrefixSet("::ffff:0:0/96")}},
		{"TrustedProxies 0.0.0.0/0 in hop-count mode lets any IPv4 peer send a PROXY header", Config{TrustedHops: 1, TrustedProxies: MustParsePrefixSet("0.0.0.0/0")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			assert.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
	_, err := New(Config{})
	require.NoError(t, err, "zero Config")
}

func TestResolverConfig(t *testing.T) {
	cfg := Config{TrustedProxies: private10, Header: "x-forwarded-for", Masquerade: lbSet}
	got := MustNew(cfg).Config()
	want := cfg
	want.Header, want.MaxHops, want.MaxHeaderBytes = "X-Forwarded-For", DefaultMaxHops, DefaultMaxHeaderBytes
	assert.Equal(t, want, got, "the validated configuration: canonical header, limits in force")
	// A Resolver built from its own Config is the same Resolver.
	assert.Equal(t, got, MustNew(got).Config())
}

func TestChainError(t *testing.T) {
	r := MustNew(xffCfg())
	_, err := r.Resolve(proxyPeer, xff("198.51.100.7, "+strings.Repeat("x", 100)))
	var ce *ChainError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.Hop)
	assert.Equal(t, "X-Forwarded-For", ce.Header)
	assert.ErrorIs(t, ce, ErrMalformed)
	msg := err.Error()
	assert.Contains(t, msg, "hop 1 in X-Forwarded-For")
	assert.LessOrEqual(t, len(msg), 160, "the hostile value is truncated: %q", msg)
}

func TestReason(t *testing.T) {
	chain := func(e error) error { return &ChainError{Hop: 1, Err: e} }
	for r := ReasonNone + 1; r.Err() != nil; r++ {
		assert.Equal(t, r, ReasonOf(chain(r.Err())), "ReasonOf a ChainError wrapping %v", r.Err())
		assert.Equal(t, r, ReasonOf(fmt.Errorf("policy: %w", chain(r.Err()))), "ReasonOf a wrapped ChainError")
		b, err := r.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, r.String(), string(b))
		var back Reason
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, r, back)
	}
	assert.Equal(t, ReasonNone, ReasonOf(nil))
	assert.Equal(t, ReasonNone, ReasonOf(ErrInvalidConfig), "not a resolution failure")
	assert.Equal(t, ReasonNone, ReasonOf(errors.New("boom")))
	assert.Equal(t, ReasonMasqueraded, ReasonOf(ErrMasqueraded), "Resolve returns it bare")
	assert.Equal(t, ReasonMasqueraded, ReasonOf(errors.Join(chain(ErrMalformed), ErrMasqueraded)), "masqueraded wins")
	assert.Nil(t, ReasonNone.Err())
	assert.Equal(t, "Reason(200)", Reason(200).String())
	_, err := Reason(200).MarshalText()
	assert.Error(t, err)
	var r Reason
	assert.Error(t, r.UnmarshalText([]byte("Malformed")), "names are exact")

	// Every sentinel Resolve can return has a Reason.
	for _, e := range []error{ErrNoAddress, ErrMalformed, ErrUnknownHop, ErrUnspecified, ErrAllTrusted,
		ErrTooFewHops, ErrTooManyHops, ErrHeaderTooLarge, ErrMultipleValues, ErrMasqueraded} {
		assert.NotEqual(t, ReasonNone, ReasonOf(e), "%v has no Reason", e)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { ReasonOf(ErrAllTrusted) }), "ReasonOf allocates")
}

func TestResolveRequest(t *testing.T) {
	r := MustNew(xffCfg())
	req, _ := http.NewRequest("GET", "http://example/", nil)
	req.RemoteAddr = "10.0.0.1:4000"
	req.Header.Set("X-Forwarded-For", "6.6.6.6, 198.51.100.7")
	res, err := r.ResolveRequest(req)
	require.NoError(t, err)
	assert.Equal(t, addr("198.51.100.7"), res.Client)
	assert.Equal(t, ap("10.0.0.1:4000"), res.Peer)

	t.Run("transport from the context wins over RemoteAddr (PROXY layer kept apart)", func(t *testing.T) {
		lb := MustNew(Config{TrustedProxies: lbSet})
		req := req.Clone(NewTransportContext(req.Context(), Transport{Peer: ap("192.0.2.10:1"), Proxy: ap("198.51.100.9:2")}))
		req.RemoteAddr = "198.51.100.9:2" // what a PROXY-aware conn reports
		res, err := lb.ResolveRequest(req)
		require.NoError(t, err)
		assert.Equal(t, addr("198.51.100.9"), res.Client)
		assert.Equal(t, SourceProxyProtocol, res.Source)
		assert.Equal(t, ap("192.0.2.10:1"), res.Peer)
	})
	t.Run("RemoteAddr without a port", func(t *testing.T) {
		req := req.Clone(req.Context())
		req.RemoteAddr = "203.0.113.9"
		res, err := r.ResolveRequest(req)
		require.NoError(t, err)
		assert.Equal(t, addr("203.0.113.9"), res.Client)
	})
	t.Run("spoof: RemoteAddr rewritten to garbage by other middleware is not a trusted unix peer (chi RealIP, GHSA-9g5q-2w5x-hmxf)", func(t *testing.T) {
		ru := MustNew(Config{TrustUnixSocket: true, Header: "X-Forwarded-For"})
		req := req.Clone(req.Context())
		req.RemoteAddr = "not-an-address"
		_, err := ru.ResolveRequest(req)
		assert.ErrorIs(t, err, ErrNoAddress)
	})
	t.Run("spoof: a Unix client's socket path that reads like a trusted address is not an IP peer", func(t *testing.T) {
		// net/http sets RemoteAddr to the path the client bound its socket to.
		unix := context.WithValue(req.Context(), http.LocalAddrContextKey, &net.UnixAddr{Name: "/run/app.sock", Net: "unix"})
		req := req.Clone(unix)
		req.RemoteAddr = "10.0.0.1:9"
		res, err := r.ResolveRequest(req)
		require.ErrorIs(t, err, ErrNoAddress, "untrusted Unix peer")
		assert.False(t, res.Peer.IsValid())
		ru := MustNew(Config{TrustUnixSocket: true, Header: "X-Forwarded-For"})
		res, err = ru.ResolveRequest(req)
		require.NoError(t, err, "trusted Unix peer")
		assert.False(t, res.Peer.IsValid())
		assert.Equal(t, addr("198.51.100.7"), res.Client, "the header's last entry")
	})
	t.Run("ResolveRequest never modifies the request", func(t *testing.T) {
		before := req.RemoteAddr
		r.ResolveRequest(req)
		assert.Equal(t, before, req.RemoteAddr)
		assert.Equal(t, "6.6.6.6, 198.51.100.7", req.Header.Get("X-Forwarded-For"))
	})
}

func TestResolveAllocs(t *testing.T) {
	for _, c := range benchCases() {
		r := MustNew(c.cfg)
		assert.Zero(t, testing.AllocsPerRun(100, func() { r.Resolve(c.t, c.h) }), "%s: Resolve allocates", c.name)
	}
	// A quoted-pair in a Forwarded node is unescaped on the stack, also when
	// the node is longer than the buffers.
	r := MustNew(fwdCfg())
	for _, v := range []string{`for="[2001:db8::\7]:80"`, `for="192.0.2.60:\_` + strings.Repeat("p", 300) + `"`} {
		h := fwd(v)
		_, err := r.Resolve(proxyPeer, h)
		require.NoError(t, err, v)
		assert.Zero(t, testing.AllocsPerRun(100, func() { r.Resolve(proxyPeer, h) }), "quoted-pair %.30s…", v)
	}
	req, _ := http.NewRequest("GET", "http://example/", nil)
	req.RemoteAddr = "10.0.0.1:4000"
	req.Header.Set("X-Forwarded-For", "198.51.100.7, 10.0.0.2")
	rx := MustNew(xffCfg())
	assert.Zero(t, testing.AllocsPerRun(100, func() { rx.ResolveRequest(req) }), "ResolveRequest allocates")
}

func TestResultString(t *testing.T) {
	r := MustNew(xffCfg())
	res, _ := r.Resolve(proxyPeer, xff("198.51.100.7, 10.0.0.3"))
	assert.Equal(t, "198.51.100.7 from x-forwarded-for hop 2 via 10.0.0.3 (peer 10.0.0.1:40000)", res.String())
	assert.Equal(t, netip.AddrPortFrom(addr("198.51.100.7"), 0), res.ClientAddrPort())
	lb := MustNew(Config{TrustedProxies: lbSet})
	res, _ = lb.Resolve(Transport{Peer: ap("192.0.2.10:1"), Proxy: ap("198.51.100.9:2")}, nil)
	assert.Equal(t, ap("198.51.100.9:2"), res.ClientAddrPort(), "from PROXY")
	res, _ = MustNew(Config{}).Resolve(Transport{}, nil)
	assert.Equal(t, "unresolved (peer unix)", res.String())
}

func TestSourceText(t *testing.T) {
	for s := SourceNone; s <= SourceHeader; s++ {
		b, err := s.MarshalText()
		require.NoError(t, err)
		var back Source
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, s, back)
	}
	var s Source
	assert.Error(t, s.UnmarshalText([]byte("bogus")))
	_, err := Source(99).MarshalText()
	assert.Error(t, err)
	assert.Equal(t, "Source(99)", Source(99).String())
}

// TestPeerUntrusted pins Transport.PeerUntrusted: the layer that accepted the
// connection judged the peer not to be a trusted proxy, so the walk takes it
// for the client whatever the resolver in force says (a trust change while
// the connection is open must not make its client's header a proxy's
// report), and a Unix-domain peer so judged has no address to give.
func TestPeerUntrusted(t *testing.T) {
	r := MustNew(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/8"), TrustUnixSocket: true, Header: "X-Forwarded-For"})
	h := http.Header{"X-Forwarded-For": {"6.6.6.6"}}

	res, err := r.Resolve(Transport{Peer: netip.MustParseAddrPort("10.0.0.1:4431"), PeerUntrusted: true}, h)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("10.0.0.1"), res.Client)
	assert.Equal(t, SourceSocket, res.Source)

	res, err = r.Resolve(Transport{Peer: netip.MustParseAddrPort("10.0.0.1:4431"), Proxy: netip.MustParseAddrPort("203.0.113.7:1"), PeerUntrusted: true}, h)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("10.0.0.1"), res.Client, "a PROXY source from an untrusted peer was believed")

	_, err = r.Resolve(Transport{PeerUntrusted: true}, h)
	assert.ErrorIs(t, err, ErrNoAddress)

	res, err = r.Resolve(Transport{Peer: netip.MustParseAddrPort("10.0.0.1:4431")}, h)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("6.6.6.6"), res.Client, "without the flag the trusted peer is stepped over")
}

// TestProxyLocal: a PROXY header that names no client (v2 LOCAL, v1
// "PROXY UNKNOWN"; Transport.ProxyLocal) from a trusted peer ends the walk
// at the peer as if no forwarding header had come (ErrAllTrusted, Via the
// peer): a layer 4 load balancer writes none, so a forged
// "203.0.113.66, 10.0.0.7" would otherwise make 203.0.113.66 the client.
// From an untrusted peer the peer is the client, as always; Explain tells
// the same.
func TestProxyLocal(t *testing.T) {
	r := MustNew(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/8"), Header: "X-Forwarded-For"})
	h := http.Header{"X-Forwarded-For": {"203.0.113.66, 10.0.0.7"}}
	lb := Transport{Peer: netip.MustParseAddrPort("10.0.0.1:4431"), ProxyLocal: true}

	res, err := r.Resolve(lb, h)
	require.ErrorIs(t, err, ErrAllTrusted)
	assert.False(t, res.Client.IsValid(), "a client from behind a header that names none: %v", res.Client)
	assert.Equal(t, 0, res.Hop)
	assert.Empty(t, res.Header, "the header was not read")
	assert.Equal(t, netip.MustParseAddr("10.0.0.1"), res.Via)
	assert.Equal(t, lb.Peer, res.Peer)
	x := r.Explain(lb, h)
	assert.Equal(t, err, x.Err, "Explain's verdict")
	assert.Equal(t, res, x.Result)

	noHeader, err := r.Resolve(lb, nil)
	assert.ErrorIs(t, err, ErrAllTrusted, "a health check without a header")
	assert.Equal(t, res, noHeader, "with the forged header as without one")

	res, err = r.Resolve(Transport{Peer: netip.MustParseAddrPort("192.0.2.5:1"), ProxyLocal: true}, h)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("192.0.2.5"), res.Client, "an untrusted peer is the client")
}

// Trusted IPv6 hops read by the backward reader are judged against the
// trusted set below its first byte too (walkXFF's IPv6 lookup on the
// address's halves), and an IPv4-mapped entry in hex as its IPv4 address.
func TestXFFIPv6TrustedBelowRoot(t *testing.T) {
	r := MustNew(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/8, 2001:db8:1::/48, 2001:db8:2:3::5/128"), Header: "X-Forwarded-For"})
	peer := Transport{Peer: ap("[2001:db8:1::1]:1")}
	tests := []struct {
		name, xff, want string
		via             string
	}{
		{"a /128 hop is stepped over", "198.51.100.7, 2001:db8:2:3::5", "198.51.100.7", "2001:db8:2:3::5"},
		{"its neighbour is the client", "198.51.100.7, 2001:db8:2:3::6", "2001:db8:2:3::6", "2001:db8:1::1"},
		{"a /48 hop is stepped over", "2001:db8:9::1, 2001:db8:1:ffff::2", "2001:db8:9::1", "2001:db8:1:ffff::2"},
		{"IPv4-mapped in hex is its IPv4 address", "198.51.100.7, ::ffff:a00:2", "198.51.100.7", "10.0.0.2"},
		{"IPv4-mapped client", "::ffff:c633:6407", "198.51.100.7", "2001:db8:1::1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.Resolve(peer, http.Header{"X-Forwarded-For": {tc.xff}})
			require.NoError(t, err)
			assert.Equal(t, addr(tc.want), res.Client)
			assert.Equal(t, addr(tc.via), res.Via)
		})
	}
}
