package redisstore

import (
	"errors"

	"github.com/sourceip/sourceip/internal/enumtext"
)

// Failure says what a [Store] decides while Redis is unreachable (a call
// failed or timed out, or the circuit breaker is open).
type Failure uint8

const (
	// FailLocal decides from local token buckets of Config.FallbackLimit in
	// this replica's memory. Each replica limits on its own meanwhile, so a
	// client spread over N replicas gets up to N × FallbackLimit; set
	// FallbackLimit to Limit.Split(N) to keep the sum near the limit.
	FailLocal Failure = iota
	// FailOpen allows every event: no limit while Redis is down.
	FailOpen
	// FailClosed refuses every event: Take returns an error wrapping
	// ratelimit.ErrUnavailable, and the HTTP middleware answers 503.
	FailClosed
)

var failureNames = []string{FailLocal: "local", FailOpen: "open", FailClosed: "closed"}

// errUnknownFailure is wrapped by MarshalText and UnmarshalText for a
// value or a name they do not know.
var errUnknownFailure = errors.New("redisstore: unknown name")

// String returns "local", "open" or "closed".
func (f Failure) String() string { return enumtext.String(failureNames, f, "Failure") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (f Failure) MarshalText() ([]byte, error) {
	return enumtext.Marshal(failureNames, f, "Failure", errUnknownFailure)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (f *Failure) UnmarshalText(text []byte) error {
	return enumtext.Unmarshal(f, failureNames, text, "Failure", errUnknownFailure)
}
