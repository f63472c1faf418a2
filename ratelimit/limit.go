package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Inf is the Rate that allows every event: a [Limiter] with it keeps no
// buckets and refuses nothing.
const Inf = math.MaxFloat64

// Limit is the shape of a token bucket: it holds at most Burst tokens and
// gains Rate tokens per second; an event takes one token (or n). A client
// that has been quiet may therefore send Burst events at once, and then
// Rate per second.
//
// A Limit is valid when Rate is positive and finite, or [Inf], and Burst
// is at least 1. The zero Limit is not valid.
type Limit struct {
	// Rate is the tokens added per second.
	Rate float64
	// Burst is the bucket's size: the most events allowed at once.
	Burst int
}

// Valid returns nil when l is valid, or an error wrapping
// [ErrInvalidConfig] that says why not.
func (l Limit) Valid() error {
	switch {
	case math.IsNaN(l.Rate) || l.Rate <= 0 || math.IsInf(l.Rate, 0):
		return fmt.Errorf("%w: Rate %v must be positive and finite, or ratelimit.Inf", ErrInvalidConfig, l.Rate)
	case l.Burst < 1:
		return fmt.Errorf("%w: Burst %d must be at least 1", ErrInvalidConfig, l.Burst)
	}
	return nil
}

// Unlimited reports whether l allows every event (Rate is [Inf]).
func (l Limit) Unlimited() bool { return l.Rate >= Inf }

// Window returns the time an empty bucket takes to fill: Burst/Rate,
// rounded up to a whole second and at least one, saturating at the largest
// Duration. It is the window a RateLimit-Policy field announces (see
// [SetHeaders]): the bucket allows Burst events per Window, in a burst or
// spread out.
func (l Limit) Window() time.Duration {
	if l.Rate <= 0 || l.Unlimited() {
		return time.Second
	}
	return max(seconds(math.Ceil(float64(l.Burst)/l.Rate)), time.Second)
}

// Split returns the share of l that each of n replicas may allow on its
// own so that together they allow about l: Rate/n and Burst/n (at least 1).
// It suits the local fallback of a shared store, used by every replica at
// once while the shared state is unreachable. Split returns l for n < 2.
func (l Limit) Split(n int) Limit {
	if n < 2 || l.Unlimited() {
		return l
	}
	return Limit{Rate: l.Rate / float64(n), Burst: max(l.Burst/n, 1)}
}

// String returns a form such as "10/s burst 20", or "unlimited".
func (l Limit) String() string {
	if l.Unlimited() {
		return "unlimited"
	}
	return strconv.FormatFloat(l.Rate, 'g', -1, 64) + "/s burst " + strconv.Itoa(l.Burst)
}

// seconds converts a number of seconds to a Duration, saturating.
func seconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return math.MaxInt64
	}
	if s <= 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}
