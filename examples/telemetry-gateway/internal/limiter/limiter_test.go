package limiter

import (
	"net/netip"
	"testing"
	"time"
)

func TestReserve(t *testing.T) {
	b := &Buckets{Rate: 10, Burst: 2}
	k := Key{Prefix: netip.MustParsePrefix("192.0.2.1/32")}
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at      time.Duration
		maxWait time.Duration
		wait    time.Duration
		ok      bool
	}{
		{0, 0, 0, true}, // burst
		{0, 0, 0, true}, // burst
		{0, 50 * time.Millisecond, 100 * time.Millisecond, false}, // would wait 100ms: refused, nothing taken
		{0, time.Second, 100 * time.Millisecond, true},            // reserved: wait 100ms
		{0, time.Second, 200 * time.Millisecond, true},            // queued behind it
		{time.Second, 0, 0, true},                                 // refilled
	}
	for i, s := range steps {
		wait, ok := b.ReserveAt(k, t0.Add(s.at), s.maxWait)
		if ok != s.ok || (wait-s.wait).Abs() > time.Millisecond {
			t.Errorf("step %d: got %v %v, want %v %v", i, wait, ok, s.wait, s.ok)
		}
	}
	other := Key{Prefix: k.Prefix, Identity: "d2"}
	if _, ok := b.ReserveAt(other, t0, 0); !ok {
		t.Error("identity did not get its own bucket")
	}
}

func TestZeroAllowsAll(t *testing.T) {
	var b *Buckets
	if _, ok := b.ReserveAt(Key{}, time.Now(), 0); !ok {
		t.Error("nil Buckets refused")
	}
	if _, ok := (&Buckets{}).ReserveAt(Key{}, time.Now(), 0); !ok {
		t.Error("zero Buckets refused")
	}
}

func TestMaxKeys(t *testing.T) {
	b := &Buckets{Rate: 1, Burst: 1, MaxKeys: 10}
	now := time.Unix(0, 0)
	for i := range 100 {
		b.ReserveAt(Key{Identity: string(rune('a' + i))}, now, 0)
	}
	if n := b.Len(); n > 10 {
		t.Errorf("%d buckets, limit 10", n)
	}
}
