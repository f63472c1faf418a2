package explain

import "errors"

var (
	// ErrInvalidConfig is wrapped by errors from [New] and [NewAdvisor].
	ErrInvalidConfig = errors.New("explain: invalid configuration")

	// ErrNotAllowed is what [Handler.Check] returns for a request the
	// Handler does not admit.
	ErrNotAllowed = errors.New("explain: request not admitted")
)

// errUnknownName is wrapped by MarshalText and UnmarshalText of this
// package's enums for a value or a name they do not know.
var errUnknownName = errors.New("explain: unknown name")
