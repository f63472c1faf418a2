package ranges

import (
	"math"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/stretchr/testify/assert"
	must "github.com/stretchr/testify/require"
)

func TestCheckSet(t *testing.T) {
	tests := []struct {
		name         string
		set          string
		allowPrivate bool
		wantErr      error
	}{
		{"public ranges", "104.16.0.0/13, 2606:4700::/32", false, nil},
		{"the empty set", "", false, ErrEmpty},
		{"0.0.0.0/0 trusts every client as a proxy", "0.0.0.0/0", false, ErrAllAddresses},
		{"::/0 trusts every client as a proxy", "::/0", true, ErrAllAddresses},
		{"0.0.0.0/0 split in halves", "0.0.0.0/1, 128.0.0.0/1", true, ErrTooBroad},
		{"IPv4 wider than /8", "96.0.0.0/7", false, ErrTooBroad},
		{"IPv6 wider than /16", "2000::/3", false, ErrTooBroad},
		{"/8 is the floor", "44.0.0.0/8", false, nil},
		{"RFC 1918", "10.0.0.0/8", false, ErrPrivate},
		{"RFC 1918 when allowed", "10.0.0.0/8", true, nil},
		{"a public-looking block that contains private space", "172.0.0.0/8", false, ErrPrivate},
		{"loopback", "127.0.0.1/32", false, ErrPrivate},
		{"IPv6 loopback", "::1/128", false, ErrPrivate},
		{"link-local", "169.254.0.0/16", false, ErrPrivate},
		{"IPv6 unique local", "fd00::/16", false, ErrPrivate},
		{"CGNAT", "100.64.0.0/10", false, ErrPrivate},
		{"this-network 0.0.0.0/8 even when private is allowed", "0.0.0.0/8", true, ErrReserved},
		{"multicast", "224.0.0.0/8", true, ErrReserved},
		{"class E and broadcast", "255.255.255.255/32", true, ErrReserved},
		{"IPv6 multicast", "ff02::/16", true, ErrReserved},
		{"IPv6 unspecified", "::/128", true, ErrReserved},
		// IPv6 prefixes that carry IPv4 addresses: trusting one whole
		// trusts every IPv4 host's translated or tunnelled address.
		{"RFC 6052 NAT64 well-known prefix 64:ff9b::/96 stands for all of IPv4", "64:ff9b::/96", true, ErrAllAddresses},
		{"a /64 holding the NAT64 well-known prefix", "64:ff9b::/64", true, ErrAllAddresses},
		{"a /16 that passes the floor but holds 64:ff9b::/96", "64::/16", true, ErrAllAddresses},
		{"RFC 6052 NAT64 of an IPv4 /7 is too broad", "64:ff9b::6000:0/103", true, ErrTooBroad},
		{"RFC 6052 NAT64 of an IPv4 /24 is one network", "64:ff9b::cb00:7100/120", false, nil},
		{"RFC 8215 local-use NAT64 prefix 64:ff9b:1::/48", "64:ff9b:1::/48", true, ErrAllAddresses},
		{"RFC 8215 network-specific /96 inside it", "64:ff9b:1:abcd::/96", true, ErrTooBroad},
		{"RFC 3056 6to4 2002::/16 stands for all of IPv4", "2002::/16", true, ErrAllAddresses},
		{"RFC 3056 6to4 of an IPv4 /7 is too broad", "2002:6000::/23", true, ErrTooBroad},
		{"RFC 3056 6to4 of an IPv4 /8 is the floor", "2002:6000::/24", false, nil},
		{"RFC 3056 6to4 site of one IPv4 host", "2002:cb00:7107::/48", false, nil},
		{"RFC 4380 Teredo 2001::/32 stands for all of IPv4", "2001::/32", true, ErrAllAddresses},
		{"a /16 that passes the floor but holds Teredo", "2001::/16", true, ErrAllAddresses},
		{"RFC 4380 every client of one Teredo server is too broad", "2001:0:cb00:7101::/64", true, ErrTooBroad},
		{"2001:db8::/32 beside Teredo is not Teredo", "2001:db8::/32", false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSet(clientip.MustParsePrefixSet(tc.set), tc.allowPrivate)
			must.ErrorIs(t, err, tc.wantErr)
		})
	}
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name           string
		cur, next      string
		shrink, growth float64
	}{
		{"same set", "192.0.2.0/24", "192.0.2.0/24", 0, 0},
		{"aggregation changes nothing", "192.0.2.0/25, 192.0.2.128/25", "192.0.2.0/24", 0, 0},
		{"deaggregation changes nothing", "192.0.2.0/24", "192.0.2.0/25, 192.0.2.128/25", 0, 0},
		{"overlapping prefixes count once", "192.0.2.0/24, 192.0.2.0/25", "192.0.2.0/24", 0, 0},
		{"half dropped", "192.0.2.0/24", "192.0.2.0/25", 0.5, 0},
		{"doubled", "192.0.2.0/24", "192.0.2.0/23", 0, 1},
		{"replaced", "192.0.2.0/24", "198.51.100.0/24", 1, 1},
		{"IPv6 measured apart from IPv4", "192.0.2.0/24, 2001:db8::/32", "192.0.2.0/24, 2001:db8::/33", 0.5, 0},
		{"a /64 in IPv6 is not lost in rounding", "2001:db8::/48", "2001:db8::/48, 2001:db9::/64", 0, 1.0 / 65536},
		{"a family the current set lacks is new", "192.0.2.0/24", "192.0.2.0/24, 2001:db8::/32", 0, math.Inf(1)},
		{"nothing to compare with", "", "192.0.2.0/24", 0, 0},
		{"the whole IPv6 space does not overflow", "2001:db8::/32", "::/0", 0, math.Ldexp(1, 32) - 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Diff(clientip.MustParsePrefixSet(tc.cur), clientip.MustParsePrefixSet(tc.next))
			assert.InDelta(t, tc.shrink, c.Shrink, 1e-12, "shrink: %+v", c)
			if c.Growth != tc.growth {
				assert.InEpsilon(t, tc.growth, c.Growth, 1e-9, "growth: %+v", c)
			}
		})
	}
	assert.Equal(t, "shrink 50.0% (IPv4), growth new family (IPv6)", Diff(clientip.MustParsePrefixSet("192.0.2.0/24"), clientip.MustParsePrefixSet("192.0.2.0/25, 2001:db8::/32")).String())
}
