package middleware

import (
	"errors"
	"fmt"

	"github.com/sourceip/sourceip/clientip"
)

var (
	// ErrInvalidConfig is wrapped by errors from [New] and [NewSourceRanges].
	ErrInvalidConfig = errors.New("middleware: invalid configuration")

	// ErrNoResult means no resolution was recorded where one was looked for:
	// a connection that did not come from [NewListener], or a request that did
	// not pass through the middleware [New] returns.
	ErrNoResult = errors.New("middleware: no client resolution recorded")

	// ErrNotAllowed means the resolved client address is outside the ranges a
	// [SourceRanges] policy admits.
	ErrNotAllowed = errors.New("middleware: client address not in an allowed source range")

	// ErrUnresolved means a [SourceRanges] policy was asked about a client
	// that could not be resolved. The error returned with it also wraps the
	// cause: one of clientip's sentinels, or [ErrNoResult].
	ErrUnresolved = errors.New("middleware: client address unresolved")

	// ErrMasqueraded means a [SourceRanges] policy was asked about a result
	// flagged as masqueraded (see [clientip.Result].Masqueraded): a node
	// address that stands in for a client who is lost. It wraps
	// [clientip.ErrMasqueraded], so errors.Is matches either.
	ErrMasqueraded = fmt.Errorf("middleware: client address is a masquerading node: %w", clientip.ErrMasqueraded)
)

// errNoRequestResult is what CheckRequest reports for a request that did not
// pass through the resolve middleware, built once.
var errNoRequestResult = fmt.Errorf("%w: %w", ErrUnresolved, ErrNoResult)

// errUnknownName is wrapped by MarshalText and UnmarshalText of [Outcome]
// for a value or a name it does not know.
var errUnknownName = errors.New("middleware: unknown name")
