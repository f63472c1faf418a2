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
	// not admit: outside the rule's Allow, or inside its Deny. A client
	// inside the Deny is refused with [ErrDenied], which wraps it.
	ErrNotAllowed = errors.New("middleware: client address not in an allowed source range")

	// ErrDenied means a [Policy] refused a client inside its deciding
	// rule's Deny, whether or not the rule's Allow holds it. It wraps
	// [ErrNotAllowed], so errors.Is matches either and [OutcomeOf] is
	// OutcomeNotAllowed; its own text tells an operator that a deny list,
	// not a missing allow entry, refused the client.
	ErrDenied error = &narrowed{text: "middleware: client address in a denied source range", parent: ErrNotAllowed}

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

// narrowed is a sentinel that is a case of another, parent: errors.Is
// matches both, and its text is its own.
type narrowed struct {
	text   string
	parent error
}

func (e *narrowed) Error() string { return e.text }
func (e *narrowed) Unwrap() error { return e.parent }

// errUnknownName is wrapped by MarshalText and UnmarshalText of [Outcome]
// for a value or a name it does not know.
var errUnknownName = errors.New("middleware: unknown name")
