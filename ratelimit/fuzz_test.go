package ratelimit

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// FuzzConformance drives a Limiter with arbitrary events (key, time step,
// tokens, allowed wait) and checks the token bucket's guarantee against a
// plain sum: for every key, the tokens of the events that act by time T
// (reservations act after their delay) never exceed Burst + Rate × (T −
// the key's first event). It also checks each Decision's own promises.
func FuzzConformance(f *testing.F) {
	f.Add([]byte{0, 0, 0x40, 0, 0, 0x40, 0, 0, 0x40, 0, 0, 0x40, 0, 5, 0x7f})
	f.Add([]byte{1, 0, 0xff, 1, 0, 0xff, 1, 0, 0xff, 2, 100, 0xc0, 1, 1, 0x41})
	f.Add([]byte{3, 7, 0x81, 3, 0, 0x81, 3, 200, 0xbf, 3, 0, 0x3f, 3, 1, 0x01})
	f.Fuzz(func(t *testing.T, ops []byte) {
		lim := Limit{Rate: 2, Burst: 3}
		l, err := New(Config{Limit: lim})
		if err != nil {
			t.Fatal(err)
		}
		type grant struct {
			at time.Time
			n  int
		}
		grants := map[int][]grant{}
		first := map[int]time.Time{}
		now := t0
		for i := 0; i+2 < len(ops); i += 3 {
			key := int(ops[i] & 3)
			now = now.Add(time.Duration(ops[i+1]) * 10 * time.Millisecond)
			n := int(ops[i+2] >> 6)
			maxWait := time.Duration(ops[i+2]&0x3f) * 50 * time.Millisecond
			k := Key{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(key)}), 32)}
			d, err := l.Take(context.Background(), k, now, n, maxWait)
			if err != nil {
				t.Fatalf("event %d: %v", i/3, err)
			}
			if _, ok := first[key]; !ok {
				first[key] = now
			}
			switch {
			case d.Remaining < 0 || d.Remaining > lim.Burst:
				t.Fatalf("event %d: Remaining %d", i/3, d.Remaining)
			case d.Allowed && (d.Delay < 0 || d.Delay > maxWait || d.RetryAfter != 0):
				t.Fatalf("event %d: allowed with %+v, maxWait %v", i/3, d, maxWait)
			case !d.Allowed && (d.RetryAfter <= maxWait || d.Delay != 0):
				t.Fatalf("event %d: refused with %+v, maxWait %v", i/3, d, maxWait)
			case d.Refill <= 0:
				t.Fatalf("event %d: Refill %v", i/3, d.Refill)
			}
			if d.Allowed && n > 0 {
				grants[key] = append(grants[key], grant{now.Add(d.Delay), n})
			}
		}
		for key, gs := range grants {
			sum := 0
			for j, g := range gs {
				if j > 0 && g.at.Before(gs[j-1].at.Add(-time.Microsecond)) {
					t.Fatalf("key %d: a reservation acts before an earlier one", key)
				}
				sum += g.n
				allowed := float64(lim.Burst) + lim.Rate*g.at.Sub(first[key]).Seconds()
				if float64(sum) > allowed+1e-6 {
					t.Fatalf("key %d: %d tokens by %v after its first event, the bucket allows %.3f",
						key, sum, g.at.Sub(first[key]), allowed)
				}
			}
		}
	})
}
