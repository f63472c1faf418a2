package proxyproto

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The untrusted budget: a per-source bound that counts an IPv6 /64 as one
// source (an IPv6 host picks any address in its /64, so a bound per address
// would not hold it), a total bound, and slots that come back on release
// without leaving sources behind.
func TestUntrustedBudget(t *testing.T) {
	b := untrustedBudget{max: 4, perSource: 2, bySource: map[netip.Addr]int{}}
	a := netip.MustParseAddr
	steps := []struct {
		peer string
		want ShedReason
		ok   bool
	}{
		{"192.0.2.1", 0, true},
		{"192.0.2.1", 0, true},
		{"192.0.2.1", ShedSourceBudget, false},
		{"2001:db8:0:1::1", 0, true},
		{"2001:db8:0:1:ffff::2", 0, true}, // same /64
		{"2001:db8:0:1::3", ShedSourceBudget, false},
		{"2001:db8:0:2::1", ShedUntrustedBudget, false}, // another /64, but the total is spent
		{"198.51.100.1", ShedUntrustedBudget, false},
	}
	for _, s := range steps {
		why, ok := b.take(a(s.peer))
		require.Equal(t, s.ok, ok, "take(%s)", s.peer)
		if !ok {
			assert.Equal(t, s.want, why, "take(%s)", s.peer)
		}
	}
	assert.Equal(t, 4, b.load())

	b.release(a("2001:db8:0:1::1"))
	_, ok := b.take(a("2001:db8:0:2::1"))
	assert.True(t, ok, "a freed slot is taken by another source")
	for _, p := range []string{"192.0.2.1", "192.0.2.1", "2001:db8:0:1::2", "2001:db8:0:2::1"} {
		b.release(a(p))
	}
	assert.Zero(t, b.load())
	assert.Empty(t, b.bySource, "sources without pending connections are forgotten")
}
