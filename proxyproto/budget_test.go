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
	b := untrustedBudget{max: 4, perSource: 2, bySource: map[netip.Prefix]int{}}
	a := netip.MustParseAddr
	takeSteps(t, &b, []budgetStep{
		{"192.0.2.1", 0, true},
		{"192.0.2.1", 0, true},
		{"192.0.2.1", ShedSourceBudget, false},
		{"2001:db8:0:1::1", 0, true},
		{"2001:db8:0:1:ffff::2", 0, true}, // same /64
		{"2001:db8:0:1::3", ShedSourceBudget, false},
		{"2001:db8:0:2::1", ShedUntrustedBudget, false}, // another /64, but the total is spent
		{"198.51.100.1", ShedUntrustedBudget, false},
	})
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

// An IPv6 address that carries an IPv4 address is the IPv4 host it stands
// for, as clientip.RateLimitKey keys it. Behind a NAT64 translator
// (64:ff9b::/96, RFC 6052) every IPv4 client of an IPv6-only service comes
// from the same /64: counted by /64, one IPv4 client holding
// MaxPendingPerSource silent connections got every other IPv4 client shed.
// A 6to4 host (2002:V4ADDR::/48) owns 65,536 /64s: counted by /64 it could
// take the whole untrusted budget alone.
func TestUntrustedBudgetEmbeddedIPv4(t *testing.T) {
	b := untrustedBudget{max: 8, perSource: 1, bySource: map[netip.Prefix]int{}}
	takeSteps(t, &b, []budgetStep{
		{"64:ff9b::c000:201", 0, true},                   // NAT64 192.0.2.1
		{"64:ff9b::c633:6401", 0, true},                  // NAT64 198.51.100.1: another client
		{"192.0.2.1", ShedSourceBudget, false},           // the first, not translated
		{"2002:cb00:7101:1::1", 0, true},                 // 6to4 203.0.113.1
		{"2002:cb00:7101:2::1", ShedSourceBudget, false}, // the same host, another /64
		{"2001:db8:0:1::1", 0, true},                     // plain IPv6: by /64
		{"2001:db8:0:1:ffff::2", ShedSourceBudget, false},
	})
}

// budgetStep is one take of a peer: whether it gets a slot, and why not.
type budgetStep struct {
	peer string
	want ShedReason
	ok   bool
}

func takeSteps(t *testing.T, b *untrustedBudget, steps []budgetStep) {
	t.Helper()
	for _, s := range steps {
		why, ok := b.take(netip.MustParseAddr(s.peer))
		require.Equal(t, s.ok, ok, "take(%s)", s.peer)
		if !ok {
			assert.Equal(t, s.want, why, "take(%s)", s.peer)
		}
	}
}
