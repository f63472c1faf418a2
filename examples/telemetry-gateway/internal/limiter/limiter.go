// Package limiter holds per-client token buckets for the telemetry gateway,
// keyed by clientip's rate-limit key (an IPv4 address or an IPv6 /64) and,
// for masqueraded clients, a device identity as well.
//
// A caller reserves a token and is told how long to wait before acting;
// waiting is how MQTT publishers are slowed down (the broker stops reading
// from a connection while its hook waits, so TCP pushes back on the device)
// without losing anything. A reservation that would have to wait longer than
// the caller's limit takes nothing and fails: that is when the gateway
// refuses.
package limiter

import (
	"net/netip"
	"sync"
	"time"
)

// Key identifies a bucket.
type Key struct {
	// Prefix is clientip.RateLimitKey of the client (or of the node, when
	// the client is masqueraded).
	Prefix netip.Prefix
	// Identity narrows a masqueraded node's bucket to one device (its MQTT
	// client id); "" otherwise.
	Identity string
}

// Buckets is a set of token buckets with one rate and burst. The zero
// Buckets (and one with Rate 0) allows everything. It is safe for concurrent
// use.
type Buckets struct {
	// Rate is the tokens added per second; Burst the bucket size (at least 1).
	Rate  float64
	Burst int
	// MaxKeys bounds the buckets held; idle (full) buckets are dropped first
	// when it is reached. Zero means 100000.
	MaxKeys int

	mu sync.Mutex
	m  map[Key]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// ReserveAt takes a token from key's bucket at now and returns how long the
// caller must wait before acting. When the wait would exceed maxWait it takes
// nothing and reports false.
func (b *Buckets) ReserveAt(key Key, now time.Time, maxWait time.Duration) (time.Duration, bool) {
	if b == nil || b.Rate <= 0 {
		return 0, true
	}
	burst := float64(max(b.Burst, 1))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = make(map[Key]*bucket)
	}
	bk := b.m[key]
	if bk == nil {
		b.makeRoom(now, burst)
		bk = &bucket{tokens: burst, last: now}
		b.m[key] = bk
	}
	if el := now.Sub(bk.last); el > 0 {
		bk.tokens = min(burst, bk.tokens+el.Seconds()*b.Rate)
		bk.last = now
	}
	if bk.tokens >= 1 {
		bk.tokens--
		return 0, true
	}
	wait := time.Duration((1 - bk.tokens) / b.Rate * float64(time.Second))
	if wait > maxWait {
		return wait, false
	}
	bk.tokens--
	return wait, true
}

// Len returns the number of buckets held.
func (b *Buckets) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}

func (b *Buckets) makeRoom(now time.Time, burst float64) {
	limit := b.MaxKeys
	if limit <= 0 {
		limit = 100000
	}
	if len(b.m) < limit {
		return
	}
	for k, bk := range b.m {
		if bk.tokens+now.Sub(bk.last).Seconds()*b.Rate >= burst {
			delete(b.m, k)
		}
	}
	for k := range b.m {
		if len(b.m) < limit {
			break
		}
		delete(b.m, k)
	}
}
