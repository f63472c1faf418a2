package clientip

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPrefixSetCovers(t *testing.T) {
	tests := []struct {
		name string
		set  string
		p    string
		want bool
	}{
		{"a prefix covers itself", "10.0.0.0/8", "10.0.0.0/8", true},
		{"a shorter prefix covers a longer one", "10.0.0.0/8", "10.1.0.0/16", true},
		{"a longer prefix does not cover a shorter one", "10.1.0.0/16", "10.0.0.0/8", false},
		{"a single host", "192.0.2.7", "192.0.2.7/32", true},
		{"a neighbour host is not covered", "192.0.2.7", "192.0.2.6/31", false},
		{"two halves cover the whole", "10.0.0.0/9, 10.128.0.0/9", "10.0.0.0/8", true},
		{"halves within a byte cover the whole", "192.0.2.0/25, 192.0.2.128/25", "192.0.2.0/24", true},
		{"four quarters across bytes cover the whole", "10.0.0.0/10, 10.64.0.0/10, 10.128.0.0/10, 10.192.0.0/10", "10.0.0.0/8", true},
		{"three quarters leave a gap", "10.0.0.0/10, 10.64.0.0/10, 10.192.0.0/10", "10.0.0.0/8", false},
		{"every host of a /30 one by one", "192.0.2.0, 192.0.2.1, 192.0.2.2, 192.0.2.3", "192.0.2.0/30", true},
		{"all but one host of a /30", "192.0.2.0, 192.0.2.1, 192.0.2.3", "192.0.2.0/30", false},
		{"nested union deep down covers", "10.0.0.0/24, 10.0.1.0/25, 10.0.1.128/25", "10.0.0.0/23", true},
		{"0.0.0.0/0 covers any IPv4 prefix", "0.0.0.0/0", "203.0.113.0/24", true},
		{"an IPv4 set covers no IPv6 prefix", "0.0.0.0/0", "2001:db8::/32", false},
		{"IPv6 halves", "2001:db8::/33, 2001:db8:8000::/33", "2001:db8::/32", true},
		{"IPv6 with a gap", "2001:db8::/33", "2001:db8::/32", false},
		{"a mapped prefix is its IPv4 prefix", "10.0.0.0/8", "::ffff:10.0.0.0/104", true},
		{"host bits are masked", "10.0.0.0/8", "10.1.2.3/16", true},
		{"the empty set covers nothing", "", "10.0.0.0/8", false},
		{"::/0 alone leaves the mapped range to IPv4", "::/0", "::/0", false},
		{"::/0 with 0.0.0.0/0 covers all", "::/0, 0.0.0.0/0", "::/0", true},
		{"an IPv6 prefix outside the mapped range needs no IPv4", "::/1", "2000::/3", true},
		{"a /96 that holds the mapped range", "0.0.0.0/0, ::/80", "::/80", true},
		// Contains answers for ::ffff:0:0/96 from the IPv4 prefixes, so
		// the IPv6 prefixes need only cover the rest.
		{"the mapped range by IPv4 and its neighbour by IPv6 cover their /95", "0.0.0.0/0, ::fffe:0:0/96", "::fffe:0:0/95", true},
		{"the mapped range's IPv6 twin adds nothing to a /95", "0.0.0.0/0, ::fffd:0:0/96", "::fffe:0:0/95", false},
		{"the neighbour without all of IPv4 leaves the mapped range out", "::fffe:0:0/96, 128.0.0.0/1", "::fffe:0:0/95", false},
		{"every step down to the mapped range by IPv6", "0.0.0.0/0, ::/81, ::8000:0:0/82, ::c000:0:0/83, ::e000:0:0/84, ::f000:0:0/85, ::f800:0:0/86, ::fc00:0:0/87, ::fe00:0:0/88, ::ff00:0:0/89, ::ff80:0:0/90, ::ffc0:0:0/91, ::ffe0:0:0/92, ::fff0:0:0/93, ::fff8:0:0/94, ::fffc:0:0/95, ::fffe:0:0/96", "::/80", true},
		{"one step missing", "0.0.0.0/0, ::/81, ::8000:0:0/82, ::c000:0:0/83, ::e000:0:0/84, ::f000:0:0/85, ::f800:0:0/86, ::fc00:0:0/87, ::fe00:0:0/88, ::ff00:0:0/89, ::ff80:0:0/90, ::ffc0:0:0/91, ::ffe0:0:0/92, ::fff0:0:0/93, ::fff8:0:0/94, ::fffe:0:0/96", "::/80", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := MustParsePrefixSet(tc.set)
			assert.Equal(t, tc.want, s.Covers(netip.MustParsePrefix(tc.p)))
		})
	}
	assert.False(t, MustParsePrefixSet("0.0.0.0/0").Covers(netip.Prefix{}), "the invalid prefix is covered")
}

// TestPrefixSetCoversReference compares Covers with a reference that asks
// Contains about every address of the prefix, on random sets of small
// prefixes inside 10.0.0.0/20.
func TestPrefixSetCoversReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := netip.MustParseAddr("10.0.0.0").As4()
	at := func(off uint32) netip.Addr {
		b := base
		b[2], b[3] = byte(off>>8), byte(off)
		return netip.AddrFrom4(b)
	}
	for range 300 {
		var ps []netip.Prefix
		for range 1 + rng.IntN(24) {
			bits := 21 + rng.IntN(12)
			ps = append(ps, netip.PrefixFrom(at(rng.Uint32N(1<<12)), bits).Masked())
		}
		s, err := NewPrefixSet(ps...)
		if !assert.NoError(t, err) {
			return
		}
		for range 20 {
			p := netip.PrefixFrom(at(rng.Uint32N(1<<12)), 20+rng.IntN(13)).Masked()
			want := true
			for a := p.Addr(); p.Contains(a); a = a.Next() {
				if !s.Contains(a) {
					want = false
					break
				}
			}
			assert.Equal(t, want, s.Covers(p), "%s.Covers(%s)", s, p)
		}
	}
}

// TestPrefixSetCoversMappedReference compares Covers with Contains around
// ::ffff:0:0/96, whose addresses Contains looks up among the IPv4 prefixes:
// random sets of IPv6 prefixes of /88 to /97 inside ::ff00:0:0/88, with all
// of IPv4 or none, against prefixes there of the same lengths. Membership is
// then the same across each /97, so asking Contains about the first address
// of each /97 of p is the reference.
func TestPrefixSetCoversMappedReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	at := func(bits int) netip.Prefix {
		// Near ::ffff:0:0 more often than not, where the cases are.
		b := [16]byte{10: 0xff, 11: 0xff ^ byte(rng.IntN(1<<rng.IntN(9))), 12: byte(rng.IntN(256))}
		return netip.PrefixFrom(netip.AddrFrom16(b), bits).Masked()
	}
	for range 300 {
		var ps []netip.Prefix
		if rng.IntN(2) == 0 {
			ps = append(ps, netip.MustParsePrefix("0.0.0.0/0"))
		}
		for range rng.IntN(12) {
			ps = append(ps, at(88+rng.IntN(10)))
		}
		s, err := NewPrefixSet(ps...)
		if !assert.NoError(t, err) {
			return
		}
		for range 20 {
			p := at(88 + rng.IntN(10))
			want := true
			b := p.Addr().As16()
			for i := range 1 << (97 - p.Bits()) {
				c := b
				c[11] |= byte(i >> 1)
				c[12] |= byte(i&1) << 7
				if !s.Contains(netip.AddrFrom16(c)) {
					want = false
					break
				}
			}
			assert.Equal(t, want, s.Covers(p), "%s.Covers(%s)", s, p)
		}
	}
}

func TestPrefixSetCoversNoAllocs(t *testing.T) {
	s := MustParsePrefixSet("10.0.0.0/9, 10.128.0.0/9")
	p := netip.MustParsePrefix("10.0.0.0/8")
	assert.Zero(t, testing.AllocsPerRun(100, func() { s.Covers(p) }), "Covers allocates")
	s = MustParsePrefixSet("0.0.0.0/0, ::fffe:0:0/96")
	p = netip.MustParsePrefix("::fffe:0:0/95")
	assert.Zero(t, testing.AllocsPerRun(100, func() { s.Covers(p) }), "Covers allocates around the mapped range")
}
