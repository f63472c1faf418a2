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
	"container/heap"
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
	// MaxKeys bounds the buckets held. Zero means 100000. When a new key
	// needs room, a full bucket is dropped (a full bucket holds nothing: a
	// new one would start full too), so that a client cannot get its own
	// limited bucket dropped by minting new keys while any bucket is full.
	// Only when every bucket is below full is the least recently used one
	// dropped: a limited bucket then survives at least MaxKeys-1 other keys
	// being used after it. Making room costs O(1) bucket examinations,
	// amortised over reservations, and O(log MaxKeys) heap steps.
	MaxKeys int

	mu   sync.Mutex
	m    map[Key]*bucket
	lru  bucket  // sentinel of the recency list: lru.next is the least recently used
	due  dueHeap // every bucket, by a lower bound of when it is full again
	seen int     // buckets examined by makeRoom (for tests)
}

type bucket struct {
	key    Key
	tokens float64
	last   time.Time

	prev, next *bucket // recency list
	// due is at most the time the bucket is full again: a bucket's full time
	// never moves earlier when it is used, so the heap is fixed up lazily,
	// in makeRoom, instead of on every reservation.
	due time.Time
	idx int // in Buckets.due
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
		b.lru.prev, b.lru.next = &b.lru, &b.lru
	}
	bk := b.m[key]
	if bk == nil {
		b.makeRoom(now, burst)
		bk = &bucket{key: key, tokens: burst, last: now}
		b.m[key] = bk
		wait, ok := b.take(bk, now, maxWait, burst)
		b.link(bk)
		bk.due = b.fullAt(bk, burst)
		heap.Push(&b.due, bk)
		return wait, ok
	}
	b.unlink(bk)
	b.link(bk)
	return b.take(bk, now, maxWait, burst)
}

func (b *Buckets) take(bk *bucket, now time.Time, maxWait time.Duration, burst float64) (time.Duration, bool) {
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

// full reports whether bk is full at now.
func (b *Buckets) full(bk *bucket, now time.Time, burst float64) bool {
	return bk.tokens+now.Sub(bk.last).Seconds()*b.Rate >= burst
}

// fullAt returns when bk is full again, rounded down.
func (b *Buckets) fullAt(bk *bucket, burst float64) time.Time {
	if bk.tokens >= burst {
		return bk.last
	}
	return bk.last.Add(time.Duration((burst - bk.tokens) / b.Rate * float64(time.Second)))
}

// makeRoom drops one bucket if the table is at MaxKeys: a full one if there
// is one, else the least recently used.
//
// The heap's top has the earliest due time. Due times are lower bounds, so if
// the top's is after now no bucket is full. Otherwise the top is examined:
// dropped if full, else given its current full time and sifted down. That
// second case needs the bucket to have been used since its due time was set
// (or a rounding step, after which its due time is after now), so each
// reservation pays for at most one such examination.
func (b *Buckets) makeRoom(now time.Time, burst float64) {
	limit := b.MaxKeys
	if limit <= 0 {
		limit = 100000
	}
	if len(b.m) < limit {
		return
	}
	for len(b.due) > 0 && !b.due[0].due.After(now) {
		bk := b.due[0]
		b.seen++
		if b.full(bk, now, burst) {
			b.drop(bk)
			return
		}
		bk.due = b.fullAt(bk, burst)
		if !bk.due.After(now) {
			bk.due = now.Add(1)
		}
		heap.Fix(&b.due, 0)
	}
	// No bucket is full.
	b.seen++
	b.drop(b.lru.next)
}

func (b *Buckets) drop(bk *bucket) {
	b.unlink(bk)
	heap.Remove(&b.due, bk.idx)
	delete(b.m, bk.key)
}

// link makes bk the most recently used.
func (b *Buckets) link(bk *bucket) {
	bk.prev, bk.next = b.lru.prev, &b.lru
	b.lru.prev.next = bk
	b.lru.prev = bk
}

func (b *Buckets) unlink(bk *bucket) {
	bk.prev.next, bk.next.prev = bk.next, bk.prev
	bk.prev, bk.next = nil, nil
}

// dueHeap is a min-heap of buckets by due time.
type dueHeap []*bucket

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *dueHeap) Push(x any) {
	bk := x.(*bucket)
	bk.idx = len(*h)
	*h = append(*h, bk)
}
func (h *dueHeap) Pop() any {
	old := *h
	bk := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return bk
}
