package ratelimit

import (
	"context"
	"time"
)

// Store holds the token buckets of one [Limit], per [Key], and takes
// tokens from them atomically. A [*Limiter] is the local Store: one
// process's buckets in memory. A shared store (such as the Redis/Valkey
// one in github.com/sourceip/sourceip/ratelimit/redisstore) keeps the
// buckets where every replica of a service reads and writes them, so that
// a client spread over N replicas gets its limit, not N times it.
//
// Take takes n tokens from key's bucket at now, or reserves them from the
// future when they would be there within maxWait (Decision.Delay says how
// long the caller must wait before acting), or takes nothing and refuses.
// A shared store may keep its own clock (the Redis store uses the server's)
// and ignore now. n larger than the Limit's Burst, or negative, is refused
// with an error wrapping [ErrExceedsBurst].
//
// A nil error means the Decision is the answer, including a Decision the
// store made from a local fallback (Decision.Fallback). A non-nil error
// means nothing was decided; the caller must refuse the event. A store
// configured to fail closed reports an outage with an error wrapping
// [ErrUnavailable]; ctx's error is returned when ctx ends first.
//
// Implementations must be safe for concurrent use.
type Store interface {
	Take(ctx context.Context, key Key, now time.Time, n int, maxWait time.Duration) (Decision, error)
	// Limit returns the Limit the store enforces.
	Limit() Limit
}
