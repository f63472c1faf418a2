package ratelimit

import (
	"container/heap"
	"time"
)

// Bounded memory: when a new key arrives and the table is at MaxKeys, one
// bucket goes — a full one if there is one, else the least recently used.
// A recency list orders buckets by use; a min-heap orders them by a lower
// bound of the time each is full again.

// full reports whether bk is full at now.
func (l *Limiter) full(bk *bucket, now time.Time) bool {
	return bk.tokens+now.Sub(bk.last).Seconds()*l.limit.Rate >= float64(l.limit.Burst)
}

// fullAt returns when bk is full again, rounded down.
func (l *Limiter) fullAt(bk *bucket) time.Time {
	burst := float64(l.limit.Burst)
	if bk.tokens >= burst {
		return bk.last
	}
	return bk.last.Add(seconds((burst - bk.tokens) / l.limit.Rate))
}

// makeRoom drops one bucket if the table is at MaxKeys: a full one if there
// is one, else the least recently used.
//
// The heap's top has the earliest due time. Due times are lower bounds, so if
// the top's is after now no bucket is full. Otherwise the top is examined:
// dropped if full, else given its current full time and sifted down. That
// second case needs the bucket to have been used since its due time was set
// (or a rounding step, after which its due time is after now), so each
// event pays for at most one such examination.
func (l *Limiter) makeRoom(now time.Time) {
	if len(l.m) < l.maxKeys {
		return
	}
	for len(l.due) > 0 && !l.due[0].due.After(now) {
		bk := l.due[0]
		l.seen++
		if l.full(bk, now) {
			l.drop(bk)
			l.stats.EvictedFull++
			return
		}
		bk.due = l.fullAt(bk)
		if !bk.due.After(now) {
			bk.due = now.Add(1)
		}
		heap.Fix(&l.due, 0)
	}
	// No bucket is full.
	l.seen++
	l.drop(l.lru.next)
	l.stats.EvictedBusy++
}

func (l *Limiter) drop(bk *bucket) {
	l.unlink(bk)
	heap.Remove(&l.due, bk.idx)
	delete(l.m, bk.key)
}

// link makes bk the most recently used.
func (l *Limiter) link(bk *bucket) {
	bk.prev, bk.next = l.lru.prev, &l.lru
	l.lru.prev.next = bk
	l.lru.prev = bk
}

func (l *Limiter) unlink(bk *bucket) {
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
