package ratelimit

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

// KeyFor is the Keyer's prefix with no identity, refuses what the Keyer
// refuses, and does not allocate, as documented.
func TestKeyFor(t *testing.T) {
	a := netip.MustParseAddr("2001:db8:1:2::10")
	k, ok := KeyFor(clientip.Keyer{}, a)
	require.True(t, ok)
	assert.Equal(t, Key{Prefix: netip.MustParsePrefix("2001:db8:1:2::/64")}, k)
	_, ok = KeyFor(clientip.Keyer{}, netip.Addr{})
	assert.False(t, ok, "the invalid address")
	_, ok = KeyFor(clientip.Keyer{IPv6Bits: 129}, a)
	assert.False(t, ok, "an invalid Keyer")
	six := netip.MustParseAddr("2002:c633:6407::1")
	assert.Zero(t, testing.AllocsPerRun(100, func() { KeyFor(clientip.Keyer{}, a); KeyFor(clientip.Keyer{}, six) }), "KeyFor allocates")
}
