package limiter

import (
	"net/netip"
	"strconv"
	"testing"
	"time"
)

func newKey(i int) Key {
	return Key{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}
}

var victim = Key{Prefix: netip.MustParsePrefix("192.0.2.1/32")}

// drain empties victim's bucket at now and checks that it is limited.
func drain(t *testing.T, b *Buckets, now time.Time) {
	t.Helper()
	for range b.Burst {
		b.ReserveAt(victim, now, 0)
	}
	if _, ok := b.ReserveAt(victim, now, 0); ok {
		t.Fatal("victim not limited after its burst")
	}
}

func stillLimited(t *testing.T, b *Buckets, now time.Time, what string) {
	t.Helper()
	if _, ok := b.ReserveAt(victim, now, 0); ok {
		t.Errorf("%s: the limited victim got a token: its bucket was dropped", what)
	}
}

// TestLimitedSurvivesFlood: with every bucket busy (none full), a limited
// bucket survives MaxKeys-1 new keys (the least recently used go first), and
// a limited client that keeps trying is never the least recently used.
func TestLimitedSurvivesFlood(t *testing.T) {
	const max = 1000
	b := &Buckets{Rate: 1, Burst: 5, MaxKeys: max}
	now := time.Unix(1000, 0)
	fill(b, max, now)
	drain(t, b, now)
	for i := range max - 1 {
		b.ReserveAt(newKey(i), now, 0)
	}
	if b.Len() != max {
		t.Fatalf("%d buckets, want %d", b.Len(), max)
	}
	stillLimited(t, b, now, "after MaxKeys-1 new keys")
	for i := range 20 * max {
		b.ReserveAt(newKey(max+i), now, 0)
		if i%(max/2) == 0 {
			stillLimited(t, b, now, "retrying during a flood of "+strconv.Itoa(20*max)+" new keys")
		}
	}
	if b.Len() != max {
		t.Fatalf("%d buckets, want %d", b.Len(), max)
	}
}

// TestFullGoFirst: a full bucket is dropped before a limited one even when
// the limited one is the least recently used, so new keys cannot push it out
// while any full bucket is left, and new keys never exceed MaxKeys.
func TestFullGoFirst(t *testing.T) {
	const max = 1000
	b := &Buckets{Rate: 1, Burst: 5, MaxKeys: max}
	t0 := time.Unix(1000, 0)
	b.ReserveAt(victim, t0, 0)
	// Drain the victim deep: with a 1 min wait allowed, it owes ~60 tokens.
	for {
		if _, ok := b.ReserveAt(victim, t0, time.Minute); !ok {
			break
		}
	}
	fill(b, max-1, t0.Add(time.Second)) // used after the victim, full again 1 s later
	now := t0.Add(10 * time.Second)
	for i := range max - 1 {
		b.ReserveAt(newKey(i), now, 0)
	}
	if _, ok := b.ReserveAt(victim, now, time.Second); ok {
		t.Error("the least recently used but limited victim was dropped while full buckets were left")
	}
	if b.Len() != max {
		t.Fatalf("%d buckets, want %d", b.Len(), max)
	}
}

// TestEvictionCost: making room examines O(1) buckets per new key, however
// many are held: counted with the seen hook, no timing.
func TestEvictionCost(t *testing.T) {
	for _, n := range []int{1000, 100000} {
		b := &Buckets{Rate: 10, Burst: 5, MaxKeys: n}
		t0 := time.Unix(1000, 0)
		fill(b, n, t0)
		// Use a tenth of the buckets again later, so that their due times
		// in the heap are stale and makeRoom has to fix them up.
		p := netip.MustParsePrefix("10.0.0.1/32")
		touches := 0
		for i := 0; i < n; i += 10 {
			b.ReserveAt(Key{Prefix: p, Identity: strconv.Itoa(i)}, t0.Add(50*time.Millisecond), 0)
			touches++
		}
		// New keys, some while nothing is full (t0 + 60 ms), the rest
		// after the untouched fillers are full again (t0 + 150 ms).
		const flood = 3000
		b.seen = 0
		for i := range flood {
			now := t0.Add(60 * time.Millisecond)
			if i >= flood/3 {
				now = t0.Add(150 * time.Millisecond)
			}
			b.ReserveAt(newKey(i), now, 0)
		}
		// One examination drops a bucket; any other is a bucket used since
		// its due time was set, which happens at most once per use.
		if b.seen > flood+touches {
			t.Errorf("n=%d: %d buckets examined for %d new keys (%d reuses)", n, b.seen, flood, touches)
		}
		if b.seen > 2*flood {
			t.Errorf("n=%d: %d buckets examined for %d new keys: the cost grows with the table", n, b.seen, flood)
		}
		t.Logf("n=%d: %d buckets examined for %d new keys", n, b.seen, flood)
	}
}
