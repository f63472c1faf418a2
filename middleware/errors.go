package middleware

import (
	"errors"
	"fmt"

	"github.com/sourceip/sourceip/clientip"
)

var (
	// ErrInvalidConfig is wrapped by errors from [New], [RequireClient],
	// [NewOrigin], [NewPolicy] and [NewSourceRanges], and by the error
	// [ResultFromConn] returns for every connection a [NewListener] without
	// a Trust accepted.
	ErrInvalidConfig = errors.New("middleware: invalid configuration")

	// ErrNoResult means no resolution was recorded where one was looked for:
	// a connection that did not come from [NewListener], or a request that did
	// not pass through the middleware [New] returns.
	ErrNoResult = errors.New("middleware: no client resolution recorded")

	// ErrNotAllowed means a [Policy] refused a client its deciding rule does
	// not admit: outside the rule's Allow, or inside its Deny.
	ErrNotAllowed = errors.New("middleware: client address not in an allowed source range")

	// ErrUnresolved means a [Policy] was asked about a client that could not
	// be resolved. The [Denial] returned with it also wraps the cause: one
	// of clientip's sentinels, [clientip.ErrNoTrust], or [ErrNoResult].
	ErrUnresolved = errors.New("middleware: client address unresolved")

	// ErrMasqueraded means a [Policy] was asked about a result flagged as
	// masqueraded (see [clientip.Result].Masqueraded): a node address that
	// stands in for a client who is lost. It wraps [clientip.ErrMasqueraded],
	// so errors.Is matches either.
	ErrMasqueraded = fmt.Errorf("middleware: client address is a masquerading node: %w", clientip.ErrMasqueraded)

	// ErrInvalidTarget means a [Policy] of MQTT topics was asked about a
	// target that is no topic name or filter (empty, U+0000, invalid UTF-8,
	// a misplaced wildcard): it is refused with [ErrNotAllowed] whatever the
	// rules say, so that no malformed topic slips past a rule meant for it.
	ErrInvalidTarget = errors.New("middleware: invalid policy target")
)

// errUnknownName is wrapped by MarshalText and UnmarshalText of [Outcome]
// for a value or a name it does not know.
var errUnknownName = errors.New("middleware: unknown name")
