package ratelimit

import "errors"

var (
	// ErrInvalidConfig is wrapped by errors from [New] and [NewHTTP].
	ErrInvalidConfig = errors.New("ratelimit: invalid configuration")

	// ErrExceedsBurst means an event asked for more tokens than the bucket
	// holds (n > Limit.Burst) or for a negative number: no wait would let
	// it through.
	ErrExceedsBurst = errors.New("ratelimit: more tokens than the burst")

	// ErrUnavailable means a shared [Store] could not reach its state and is
	// configured to fail closed: nothing was decided, and the event must be
	// refused. Stores wrap it with the cause.
	ErrUnavailable = errors.New("ratelimit: store unavailable")

	// ErrUnresolved means [HTTP.Check] could not name the request's
	// client, or refused a masqueraded one; the error also wraps clientip's
	// sentinel.
	ErrUnresolved = errors.New("ratelimit: client address unresolved")

	// ErrWaitTooLong is returned by [Limiter.Wait] when the wait for a token
	// would outlast the context's deadline; nothing is taken.
	ErrWaitTooLong = errors.New("ratelimit: wait would exceed the context deadline")
)
