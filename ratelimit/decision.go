package ratelimit

import (
	"math"
	"time"
)

// Decision is the answer to one request for tokens: whether it is allowed,
// and what the bucket looks like afterwards, which is what the RateLimit
// header fields and a Retry-After tell the client. It is a small
// comparable value.
type Decision struct {
	// Allowed reports whether the tokens were taken.
	Allowed bool

	// Remaining is the whole tokens left in the bucket after the decision:
	// the events the client may send now without waiting. It is 0 while
	// the bucket is in debt to earlier reservations.
	Remaining int

	// Delay is how long an allowed event must wait before it acts: zero
	// unless the tokens were reserved from the future, which only happens
	// when the caller allowed a wait (maxWait > 0).
	Delay time.Duration

	// RetryAfter is, for a refused event, how long until the bucket holds
	// the tokens it asked for: the same request, with no wait allowed,
	// succeeds then if nothing else takes them first. Zero when allowed.
	RetryAfter time.Duration

	// Refill is how long until Remaining grows by one, if nothing is taken
	// meanwhile.
	Refill time.Duration

	// Fallback reports that a shared store could not reach its shared
	// state and decided from its local fallback (see the Store's
	// documentation for what that allows).
	Fallback bool
}

// Window returns the effective window of the decision, as the RateLimit
// field reports it: within it the client can use no more than Remaining
// events. It is RetryAfter for a refused event and Refill otherwise.
func (d Decision) Window() time.Duration {
	if !d.Allowed {
		return d.RetryAfter
	}
	return d.Refill
}

// Describe returns the Decision fields that describe a bucket of lim
// holding tokens (negative while in debt to reservations): Remaining, the
// whole tokens, and Refill, the time until one more. The other fields are
// left zero for the Store to set. It serves stores that keep their state
// in another form.
func (lim Limit) Describe(tokens float64) Decision {
	burst := float64(lim.Burst)
	if tokens >= burst {
		return Decision{Remaining: lim.Burst, Refill: seconds(1 / lim.Rate)}
	}
	whole := max(math.Floor(tokens), 0)
	// At least a nanosecond: a bucket a hair below a whole token (float
	// rounding) still has to wait for it.
	return Decision{Remaining: int(whole), Refill: max(seconds((whole+1-tokens)/lim.Rate), 1)}
}
