package ratelimit

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// DefaultMaxKeys is the number of buckets a [Limiter] holds when
// Config.MaxKeys is zero.
const DefaultMaxKeys = 100000

// Config configures a [Limiter].
type Config struct {
	// Limit is the shape of every bucket. Required: the zero Limit is
	// invalid. Rate [Inf] allows everything and keeps no buckets.
	Limit Limit

	// MaxKeys bounds the buckets held; zero means [DefaultMaxKeys]. When a
	// new key needs room, a full bucket is dropped first: a full bucket
	// holds nothing a new one would not (it starts full too), so while any
	// bucket is full no client can get its own limited bucket dropped by
	// minting new keys. Only when no bucket is full is the least recently
	// used one dropped; a limited bucket then survives at least MaxKeys-1
	// other keys being used after it, and a limited client that keeps
	// trying stays recently used. Making room examines O(1) buckets,
	// amortised over the events, and costs O(log MaxKeys) heap steps.
	// About 200 bytes per bucket.
	MaxKeys int
}

// Limiter is the local [Store]: one token bucket per [Key] in this
// process's memory, bounded to Config.MaxKeys buckets. Every
// time-dependent method has an …At form that takes the time, for tests and
// for callers that already read the clock.
//
// The zero Limiter, and a nil *Limiter, fail closed: they refuse every
// event. A Limiter is safe for concurrent use. Events on a key it already
// holds do not allocate.
type Limiter struct {
	limit   Limit
	maxKeys int

	mu    sync.Mutex
	m     map[Key]*bucket
	lru   bucket  // sentinel of the recency list: lru.next is the least recently used
	due   dueHeap // every bucket, by a lower bound of when it is full again
	stats Stats
	seen  int // buckets examined by makeRoom (for tests)
}

// Stats counts what a [Limiter] did since it was made. Its counters only
// grow (but Keys); exporters turn them into metrics.
type Stats struct {
	// Keys is the number of buckets held now.
	Keys int
	// Allowed and Refused count events (not tokens).
	Allowed, Refused uint64
	// EvictedFull counts full buckets dropped to make room: harmless, a
	// new bucket would start full too.
	EvictedFull uint64
	// EvictedBusy counts buckets dropped, as the least recently used, while
	// no bucket was full: their clients, if they return, start with a full
	// bucket again. A steady rise means MaxKeys is too small for the keys
	// in use (or someone is minting keys).
	EvictedBusy uint64
}

type bucket struct {
	key    Key
	tokens float64
	last   time.Time

	prev, next *bucket // recency list
	// due is at most the time the bucket is full again: a bucket's full time
	// never moves earlier when it is used, so the heap is fixed up lazily,
	// in makeRoom, instead of on every event.
	due time.Time
	idx int // in Limiter.due
}

// New returns a Limiter for cfg, or an error wrapping [ErrInvalidConfig]
// when cfg.Limit is not valid or cfg.MaxKeys is negative.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Limit.Valid(); err != nil {
		return nil, err
	}
	if cfg.MaxKeys < 0 {
		return nil, fmt.Errorf("%w: MaxKeys %d is negative", ErrInvalidConfig, cfg.MaxKeys)
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	return &Limiter{limit: cfg.Limit, maxKeys: cfg.MaxKeys}, nil
}

// Limit returns the Limit l enforces (the zero Limit for the zero Limiter).
func (l *Limiter) Limit() Limit {
	if l == nil {
		return Limit{}
	}
	return l.limit
}

// Allow reports whether an event on key may happen now, and takes its
// token if so. It is AllowAt(key, time.Now()).
func (l *Limiter) Allow(key Key) bool { return l.AllowAt(key, time.Now()) }

// AllowAt reports whether an event on key may happen at now, and takes its
// token if so. It does not allocate when l already holds key's bucket.
func (l *Limiter) AllowAt(key Key, now time.Time) bool {
	return l.take(key, now, 1, 0).Allowed
}

// Reserve takes a token for an event on key now, from the future if need
// be: the Decision's Delay says how long the caller must wait before
// acting. When the wait would exceed maxWait it takes nothing and refuses.
// It is ReserveAt(key, time.Now(), maxWait).
func (l *Limiter) Reserve(key Key, maxWait time.Duration) Decision {
	return l.ReserveAt(key, time.Now(), maxWait)
}

// ReserveAt is [Limiter.Reserve] at now. Reservations queue: each one
// waits behind those before it. It does not allocate when l already holds
// key's bucket.
func (l *Limiter) ReserveAt(key Key, now time.Time, maxWait time.Duration) Decision {
	return l.take(key, now, 1, maxWait)
}

// Wait blocks until an event on key may happen, or ctx ends. It is
// WaitN(ctx, key, 1).
func (l *Limiter) Wait(ctx context.Context, key Key) error { return l.WaitN(ctx, key, 1) }

// WaitN blocks until n tokens of key's bucket are taken, or ctx ends. When
// the wait would outlast ctx's deadline it takes nothing and returns
// [ErrWaitTooLong] at once; when ctx ends during the wait it gives the
// tokens back and returns ctx's error. n larger than the burst fails with
// [ErrExceedsBurst] (so the zero Limiter fails every wait).
func (l *Limiter) WaitN(ctx context.Context, key Key, n int) error {
	if err := l.checkN(n); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	maxWait := time.Duration(math.MaxInt64)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = dl.Sub(now)
	}
	d := l.take(key, now, n, maxWait)
	if !d.Allowed {
		return fmt.Errorf("%w: %v more", ErrWaitTooLong, d.RetryAfter-maxWait)
	}
	if d.Delay <= 0 {
		return nil
	}
	t := time.NewTimer(d.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		l.refund(key, n)
		return ctx.Err()
	}
}

// Take implements [Store]: it takes n tokens from key's bucket at now, or
// reserves them within maxWait. ctx is not used: the local store never
// waits. It fails only for n out of range ([ErrExceedsBurst]).
func (l *Limiter) Take(_ context.Context, key Key, now time.Time, n int, maxWait time.Duration) (Decision, error) {
	if err := l.checkN(n); err != nil {
		return Decision{}, err
	}
	return l.take(key, now, n, maxWait), nil
}

func (l *Limiter) checkN(n int) error {
	if l == nil || n < 0 || n > l.limit.Burst {
		return fmt.Errorf("%w: %d tokens asked, burst %d", ErrExceedsBurst, n, l.Limit().Burst)
	}
	return nil
}

// take is every event's path. n is within [0, Burst].
func (l *Limiter) take(key Key, now time.Time, n int, maxWait time.Duration) Decision {
	if l == nil || l.limit.Burst == 0 {
		return Decision{} // the zero Limiter fails closed
	}
	if l.limit.Unlimited() {
		return Decision{Allowed: true, Remaining: l.limit.Burst}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[Key]*bucket)
		l.lru.prev, l.lru.next = &l.lru, &l.lru
	}
	bk := l.m[key]
	if bk == nil {
		l.makeRoom(now)
		bk = &bucket{key: key, tokens: float64(l.limit.Burst), last: now}
		l.m[key] = bk
		d := l.takeFrom(bk, now, n, maxWait)
		l.link(bk)
		bk.due = l.fullAt(bk)
		heap.Push(&l.due, bk)
		return d
	}
	l.unlink(bk)
	l.link(bk)
	return l.takeFrom(bk, now, n, maxWait)
}

// takeFrom refills bk to now and takes n tokens from it, or reserves them.
func (l *Limiter) takeFrom(bk *bucket, now time.Time, n int, maxWait time.Duration) Decision {
	burst, rate := float64(l.limit.Burst), l.limit.Rate
	if el := now.Sub(bk.last); el > 0 {
		bk.tokens = min(burst, bk.tokens+el.Seconds()*rate)
		bk.last = now
	}
	left := bk.tokens - float64(n)
	var wait time.Duration
	if left < 0 {
		wait = seconds(-left / rate)
		if wait > maxWait {
			l.stats.Refused++
			d := l.limit.Describe(bk.tokens)
			d.RetryAfter = wait
			return d
		}
	}
	bk.tokens = left
	l.stats.Allowed++
	d := l.limit.Describe(left)
	d.Allowed, d.Delay = true, wait
	return d
}

// refund gives n tokens back to key's bucket, if l still holds it.
func (l *Limiter) refund(key Key, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bk := l.m[key]; bk != nil {
		bk.tokens = min(float64(l.limit.Burst), bk.tokens+float64(n))
	}
}

// Len returns the number of buckets held.
func (l *Limiter) Len() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// Stats returns l's counters.
func (l *Limiter) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Keys = len(l.m)
	return s
}
