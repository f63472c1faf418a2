package ratelimit

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fill holds n buckets, each with a token taken at now (so none is full).
func fill(l *Limiter, n int, now time.Time) {
	p := netip.MustParsePrefix("10.0.0.1/32")
	for i := range n {
		l.ReserveAt(Key{Prefix: p, Identity: strconv.Itoa(i)}, now, 0)
	}
}

func newKey(i int) Key {
	return Key{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}
}

var victim = Key{Prefix: netip.MustParsePrefix("192.0.2.1/32")}

// drain empties victim's bucket at now and checks that it is limited.
func drain(t *testing.T, l *Limiter, now time.Time) {
	t.Helper()
	for range l.Limit().Burst {
		l.ReserveAt(victim, now, 0)
	}
	require.False(t, l.AllowAt(victim, now), "victim not limited after its burst")
}

func stillLimited(t *testing.T, l *Limiter, now time.Time, what string) {
	t.Helper()
	assert.False(t, l.AllowAt(victim, now), "%s: the limited victim got a token: its bucket was dropped", what)
}

// TestLimitedSurvivesFlood: with every bucket busy (none full), a limited
// bucket survives MaxKeys-1 new keys (the least recently used go first), and
// a limited client that keeps trying is never the least recently used.
func TestLimitedSurvivesFlood(t *testing.T) {
	const max = 1000
	l := mustNew(t, 1, 5, max)
	now := t0
	fill(l, max, now)
	drain(t, l, now)
	for i := range max - 1 {
		l.ReserveAt(newKey(i), now, 0)
	}
	require.Equal(t, max, l.Len())
	stillLimited(t, l, now, "after MaxKeys-1 new keys")
	for i := range 20 * max {
		l.ReserveAt(newKey(max+i), now, 0)
		if i%(max/2) == 0 {
			stillLimited(t, l, now, "retrying during a flood of "+strconv.Itoa(20*max)+" new keys")
		}
	}
	require.Equal(t, max, l.Len())
	st := l.Stats()
	assert.Zero(t, st.EvictedFull)
	assert.Equal(t, uint64(1+max-1+20*max), st.EvictedBusy, "the victim and each new key, arriving at a full table, drop one busy bucket")
}

// TestFullGoFirst: a full bucket is dropped before a limited one even when
// the limited one is the least recently used, so new keys cannot push it out
// while any full bucket is left, and new keys never exceed MaxKeys.
func TestFullGoFirst(t *testing.T) {
	const max = 1000
	l := mustNew(t, 1, 5, max)
	l.ReserveAt(victim, t0, 0)
	// Drain the victim deep: with a 1 min wait allowed, it owes ~60 tokens.
	for l.ReserveAt(victim, t0, time.Minute).Allowed {
	}
	fill(l, max-1, t0.Add(time.Second)) // used after the victim, full again 1 s later
	now := t0.Add(10 * time.Second)
	for i := range max - 1 {
		l.ReserveAt(newKey(i), now, 0)
	}
	assert.False(t, l.ReserveAt(victim, now, time.Second).Allowed,
		"the least recently used but limited victim was dropped while full buckets were left")
	require.Equal(t, max, l.Len())
	assert.Equal(t, uint64(max-1), l.Stats().EvictedFull)
}

// TestMaxKeys: the table never holds more than MaxKeys buckets.
func TestMaxKeys(t *testing.T) {
	l := mustNew(t, 1, 1, 10)
	for i := range 100 {
		l.AllowAt(Key{Identity: string(rune('a' + i))}, t0)
	}
	assert.LessOrEqual(t, l.Len(), 10)
}

// TestEvictionCost: making room examines O(1) buckets per new key, however
// many are held: counted with the seen hook, no timing.
func TestEvictionCost(t *testing.T) {
	for _, n := range []int{1000, 100000} {
		l := mustNew(t, 10, 5, n)
		fill(l, n, t0)
		// Use a tenth of the buckets again later, so that their due times
		// in the heap are stale and makeRoom has to fix them up.
		p := netip.MustParsePrefix("10.0.0.1/32")
		touches := 0
		for i := 0; i < n; i += 10 {
			l.ReserveAt(Key{Prefix: p, Identity: strconv.Itoa(i)}, t0.Add(50*time.Millisecond), 0)
			touches++
		}
		// New keys, some while nothing is full (t0 + 60 ms), the rest
		// after the untouched fillers are full again (t0 + 150 ms).
		const flood = 3000
		l.seen = 0
		for i := range flood {
			now := t0.Add(60 * time.Millisecond)
			if i >= flood/3 {
				now = t0.Add(150 * time.Millisecond)
			}
			l.ReserveAt(newKey(i), now, 0)
		}
		// One examination drops a bucket; any other is a bucket used since
		// its due time was set, which happens at most once per use.
		assert.LessOrEqual(t, l.seen, flood+touches, "n=%d: buckets examined for %d new keys (%d reuses)", n, flood, touches)
		assert.LessOrEqual(t, l.seen, 2*flood, "n=%d: the cost grows with the table", n)
		t.Logf("n=%d: %d buckets examined for %d new keys", n, l.seen, flood)
	}
}
