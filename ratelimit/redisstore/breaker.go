package redisstore

import (
	"sync"
	"time"
)

// breaker keeps an outage from costing every event a timeout: after
// threshold consecutive failed calls it opens, and for cooldown every event
// goes to the fallback without calling Redis; then one event is let
// through as a probe (the others still fall back until it ends), and its
// success closes the breaker while its failure opens it for another
// cooldown. An outage therefore costs one call's timeout per cooldown.
type breaker struct {
	threshold int
	cooldown  time.Duration

	mu        sync.Mutex
	failures  int       // consecutive
	openUntil time.Time // zero when closed
	probing   bool
	opens     uint64
}

// allow reports whether an event may call Redis at now.
func (b *breaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.openUntil.IsZero():
		return true
	case b.probing || now.Before(b.openUntil):
		return false
	}
	b.probing = true
	return true
}

// success records a call that worked: the breaker closes.
func (b *breaker) success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures, b.openUntil, b.probing = 0, time.Time{}, false
}

// abandon records a call that ended with its caller's context, which says
// nothing about Redis: a probe it was gives way to the next event's.
func (b *breaker) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

// failure records a call that failed at now.
func (b *breaker) failure(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.probing || b.failures >= b.threshold {
		if b.openUntil.IsZero() {
			b.opens++
		}
		b.openUntil, b.probing = now.Add(b.cooldown), false
	}
}

// state returns whether the breaker is open (or probing) and how often it
// opened.
func (b *breaker) state() (open bool, opens uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.openUntil.IsZero(), b.opens
}
