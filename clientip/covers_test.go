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

func TestPrefixSetCoversNoAllocs(t *testing.T) {
	s := MustParsePrefixSet("10.0.0.0/9, 10.128.0.0/9")
	p := netip.MustParsePrefix("10.0.0.0/8")
	assert.Zero(t, testing.AllocsPerRun(100, func() { s.Covers(p) }), "Covers allocates")
}
