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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := tc.k.Key(netip.MustParseAddr(tc.a))
			require.True(t, ok)
			assert.Equal(t, tc.want, p.String())
		})
	}
	_, ok := (Keyer{}).Key(netip.Addr{})
	assert.False(t, ok, "key for the invalid address")
	_, ok = (Keyer{IPv6Bits: 129}).Key(netip.MustParseAddr("::1"))
	assert.False(t, ok, "key for an out-of-range length")
	assert.Equal(t, RateLimitKey(netip.MustParseAddr("2001:db8::1")), RateLimitKey(netip.MustParseAddr("2001:db8::2")),
		"two addresses of one /64 share a key")
	a := netip.MustParseAddr("2001:db8::1")
	assert.Zero(t, testing.AllocsPerRun(100, func() { RateLimitKey(a) }), "RateLimitKey allocates")
}
