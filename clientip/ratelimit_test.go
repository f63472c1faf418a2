package clientip

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeyer(t *testing.T) {
	tests := []struct {
		name string
		k    Keyer
		a    string
		want string
	}{
		{"IPv4 stays whole", Keyer{}, "198.51.100.7", "198.51.100.7/32"},
		{"IPv6 grouped to /64 by default", Keyer{}, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"mapped address unmapped first (Traefik collapsed them to ::)", Keyer{}, "::ffff:198.51.100.7", "198.51.100.7/32"},
		{"zone dropped", Keyer{}, "fe80::1%eth0", "fe80::/64"},
		{"configurable IPv6 prefix", Keyer{IPv6Bits: 48}, "2001:db8:1:2::1", "2001:db8:1::/48"},
		{"configurable IPv4 prefix", Keyer{IPv4Bits: 24}, "198.51.100.7", "198.51.100.0/24"},
		// One IPv4 host owns a 6to4 /48: keyed by /64 it would hold 65,536
		// buckets.
		{"6to4 keyed by its IPv4 address (RFC 3056 §2)", Keyer{}, "2002:c633:6407:ffff::1", "198.51.100.7/32"},
		{"6to4 under the IPv4 prefix length", Keyer{IPv4Bits: 24}, "2002:c633:6407::1", "198.51.100.0/24"},
		// RFC 4380 §4's layout; the example of Wikipedia's Teredo article:
		// server 65.54.227.120, client 192.0.2.45 port 40000.
		{"Teredo keyed by the client's public IPv4 address (RFC 4380 §4)", Keyer{}, "2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45/32"},
		{"NAT64 well-known prefix keyed by the IPv4 client (RFC 6052 §2.1)", Keyer{}, "64:ff9b::198.51.100.7", "198.51.100.7/32"},
		{"NAT64 local-use prefix is ordinary IPv6 unless configured (RFC 8215)", Keyer{}, "64:ff9b:1::c633:6407", "64:ff9b:1::/64"},
		{"NAT64 local-use prefix configured", Keyer{NAT64: netip.MustParsePrefix("64:ff9b:1::/96")}, "64:ff9b:1::c633:6407", "198.51.100.7/32"},
		{"2001:db8::/32 is not Teredo", Keyer{}, "2001:db8:0:0:8000:63bf:3fff:fdd2", "2001:db8::/64"},
		{"embedded addresses as IPv6 when asked", Keyer{EmbeddedAsIPv6: true}, "2002:c633:6407:ffff::1", "2002:c633:6407:ffff::/64"},
		{"NAT64 as IPv6 when asked", Keyer{EmbeddedAsIPv6: true, NAT64: netip.MustParsePrefix("64:ff9b:1::/96")}, "64:ff9b::198.51.100.7", "64:ff9b::/64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := netip.MustParseAddr(tc.a)
			p, ok := tc.k.Key(a)
			require.True(t, ok)
			assert.Equal(t, tc.want, p.String())
			assert.Zero(t, testing.AllocsPerRun(100, func() { tc.k.Key(a) }), "Key allocates")
		})
	}
	_, ok := (Keyer{}).Key(netip.Addr{})
	assert.False(t, ok, "key for the invalid address")
	_, ok = (Keyer{IPv6Bits: 129}).Key(netip.MustParseAddr("::1"))
	assert.False(t, ok, "key for an out-of-range length")
	assert.ErrorIs(t, Keyer{IPv6Bits: 129}.Valid(), ErrInvalidConfig)
	assert.ErrorIs(t, Keyer{IPv4Bits: -1}.Valid(), ErrInvalidConfig)
	assert.NoError(t, Keyer{}.Valid())
	assert.Equal(t, RateLimitKey(netip.MustParseAddr("2001:db8::1")), RateLimitKey(netip.MustParseAddr("2001:db8::2")),
		"two addresses of one /64 share a key")
	a := netip.MustParseAddr("2001:db8::1")
	assert.Zero(t, testing.AllocsPerRun(100, func() { RateLimitKey(a) }), "RateLimitKey allocates")
	a = netip.MustParseAddr("2002:c633:6407::1")
	assert.Zero(t, testing.AllocsPerRun(100, func() { RateLimitKey(a) }), "RateLimitKey allocates for 6to4")
	assert.Equal(t, RateLimitKey(netip.MustParseAddr("198.51.100.7")), RateLimitKey(netip.MustParseAddr("2002:c633:6407:1::1")),
		"a 6to4 address shares its IPv4 host's key")
	assert.NotEqual(t, RateLimitKey(netip.MustParseAddr("64:ff9b::198.51.100.7")), RateLimitKey(netip.MustParseAddr("64:ff9b::198.51.100.8")),
		"two IPv4 clients behind one NAT64 translator share a key")
}

// TestKeyerNAT64Layouts pins RFC 6052 §2.4's table: 192.0.2.33 embedded
// under a prefix of each length §2.2 allows, the "u" octet skipped.
func TestKeyerNAT64Layouts(t *testing.T) {
	for _, tc := range []struct{ prefix, addr string }{
		{"2001:db8::/32", "2001:db8:c000:221::"},
		{"2001:db8:100::/40", "2001:db8:1c0:2:21::"},
		{"2001:db8:122::/48", "2001:db8:122:c000:2:2100::"},
		{"2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"},
		{"2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"},
		{"2001:db8:122:344::/96", "2001:db8:122:344::192.0.2.33"},
	} {
		k := Keyer{NAT64: netip.MustParsePrefix(tc.prefix)}
		p, ok := k.Key(netip.MustParseAddr(tc.addr))
		require.True(t, ok, tc.prefix)
		assert.Equal(t, "192.0.2.33/32", p.String(), tc.prefix)
		p, ok = k.Key(netip.MustParseAddr("2001:db9::1"))
		require.True(t, ok, tc.prefix)
		assert.Equal(t, "2001:db9::/64", p.String(), "%s: an address outside the prefix stays IPv6", tc.prefix)
	}
}

// TestKeyerRefusesBadNAT64 pins RFC 6052 §2.2's prefix lengths: any other
// NAT64 prefix makes every key fail, so that ratelimit.NewHTTP's probe
// refuses the configuration instead of keying clients wrongly.
func TestKeyerRefusesBadNAT64(t *testing.T) {
	for _, p := range []netip.Prefix{
		netip.MustParsePrefix("2001:db8::/33"),
		netip.MustParsePrefix("2001:db8::/128"),
		netip.MustParsePrefix("2001:db8::1/96"), // host bits set
		netip.MustParsePrefix("192.0.2.0/24"),
		netip.MustParsePrefix("::ffff:0:0/96"),
		netip.PrefixFrom(netip.MustParseAddr("2001:db8::"), 200),
	} {
		_, ok := Keyer{NAT64: p}.Key(netip.MustParseAddr("198.51.100.7"))
		assert.False(t, ok, "NAT64 %s accepted", p)
		assert.ErrorIs(t, Keyer{NAT64: p}.Valid(), ErrInvalidConfig, "NAT64 %s", p)
	}
}
