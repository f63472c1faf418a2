package middleware

import (
	"errors"
	"fmt"

	"github.com/sourceip/sourceip/clientip"
)

// Outcome classifies how a resolution or a policy check ended, in a small
// fixed set of names fit for log fields and metric attributes: it never holds
// an address or anything a client wrote.
type Outcome uint8

const (
	// OutcomeResolved: a client was named (and, for a policy, admitted).
	OutcomeResolved Outcome = iota
	// OutcomeMasqueraded: the result is a masquerading node
	// ([clientip.ErrMasqueraded], [ErrMasqueraded]).
	OutcomeMasqueraded
	// OutcomeNoAddress: the socket peer has no IP address ([clientip.ErrNoAddress]).
	OutcomeNoAddress
	// OutcomeMalformed: a hop the walk had to read is not an address ([clientip.ErrMalformed]).
	OutcomeMalformed
	// OutcomeUnknownHop: an RFC 7239 node is unknown or obfuscated ([clientip.ErrUnknownHop]).
	OutcomeUnknownHop
	// OutcomeUnspecified: the walk reached 0.0.0.0 or :: ([clientip.ErrUnspecified]).
	OutcomeUnspecified
	// OutcomeAllTrusted: every hop is a trusted proxy ([clientip.ErrAllTrusted]).
	OutcomeAllTrusted
	// OutcomeTooFewHops: fewer hops than trusted proxies ([clientip.ErrTooFewHops]).
	OutcomeTooFewHops
	// OutcomeTooManyHops: more hops than Config.MaxHops ([clientip.ErrTooManyHops]).
	OutcomeTooManyHops
	// OutcomeHeaderTooLarge: the forwarding header is too large ([clientip.ErrHeaderTooLarge]).
	OutcomeHeaderTooLarge
	// OutcomeMultipleValues: a single-address header has several values ([clientip.ErrMultipleValues]).
	OutcomeMultipleValues
	// OutcomeNotAllowed: a policy refused a client outside its ranges ([ErrNotAllowed]).
	OutcomeNotAllowed
	// OutcomeUnresolved: a policy refused a client that was not resolved
	// ([ErrUnresolved]), or no resolution was recorded ([ErrNoResult]).
	OutcomeUnresolved
	// OutcomeError: any other error.
	OutcomeError
)

var outcomeNames = [...]string{
	OutcomeResolved:       "resolved",
	OutcomeMasqueraded:    "masqueraded",
	OutcomeNoAddress:      "no_address",
	OutcomeMalformed:      "malformed",
	OutcomeUnknownHop:     "unknown_hop",
	OutcomeUnspecified:    "unspecified",
	OutcomeAllTrusted:     "all_trusted",
	OutcomeTooFewHops:     "too_few_hops",
	OutcomeTooManyHops:    "too_many_hops",
	OutcomeHeaderTooLarge: "header_too_large",
	OutcomeMultipleValues: "multiple_values",
	OutcomeNotAllowed:     "not_allowed",
	OutcomeUnresolved:     "unresolved",
	OutcomeError:          "error",
}

// outcomeErrs maps sentinels to outcomes, policy sentinels first: a policy
// error wraps both its own sentinel and clientip's cause, and the policy's
// verdict is the one to report.
var outcomeErrs = [...]struct {
	err error
	o   Outcome
}{
	{ErrNotAllowed, OutcomeNotAllowed},
	{clientip.ErrMasqueraded, OutcomeMasqueraded},
	{ErrUnresolved, OutcomeUnresolved},
	{ErrNoResult, OutcomeUnresolved},
	{clientip.ErrNoAddress, OutcomeNoAddress},
	{clientip.ErrMalformed, OutcomeMalformed},
	{clientip.ErrUnknownHop, OutcomeUnknownHop},
	{clientip.ErrUnspecified, OutcomeUnspecified},
	{clientip.ErrAllTrusted, OutcomeAllTrusted},
	{clientip.ErrTooFewHops, OutcomeTooFewHops},
	{clientip.ErrTooManyHops, OutcomeTooManyHops},
	{clientip.ErrHeaderTooLarge, OutcomeHeaderTooLarge},
	{clientip.ErrMultipleValues, OutcomeMultipleValues},
}

// OutcomeOf classifies err, an error returned by [clientip.Resolver.Resolve],
// [ResultFromConn] or [SourceRanges.Check]: nil is OutcomeResolved, and a
// policy error is classified by the policy's verdict (OutcomeNotAllowed,
// OutcomeUnresolved or OutcomeMasqueraded) rather than by its cause.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return OutcomeResolved
	}
	for _, e := range outcomeErrs {
		if errors.Is(err, e.err) {
			return e.o
		}
	}
	return OutcomeError
}

// String returns the Outcome's name: "resolved", "masqueraded", "no_address",
// "malformed", "unknown_hop", "unspecified", "all_trusted", "too_few_hops",
// "too_many_hops", "header_too_large", "multiple_values", "not_allowed",
// "unresolved" or "error".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (o Outcome) MarshalText() ([]byte, error) {
	if int(o) >= len(outcomeNames) {
		return nil, fmt.Errorf("middleware: unknown Outcome %d", uint8(o))
	}
	return []byte(outcomeNames[o]), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (o *Outcome) UnmarshalText(text []byte) error {
	for i, n := range outcomeNames {
		if string(text) == n {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("middleware: unknown outcome %q", text)
}

// reason is the short plain-text explanation written in a default 400 or 403
// body. It names the configured header (never anything a client wrote).
func (o Outcome) reason(header string) string {
	in := ""
	if header != "" {
		in = " in " + header
	}
	switch o {
	case OutcomeMasqueraded:
		return "the client address was masqueraded by a node and cannot be verified"
	case OutcomeNoAddress:
		return "the connection has no IP address"
	case OutcomeMalformed:
		return "malformed address" + in
	case OutcomeUnknownHop:
		return "unknown hop" + in
	case OutcomeUnspecified:
		return "unspecified address" + in
	case OutcomeAllTrusted:
		return "every hop is a trusted proxy"
	case OutcomeTooFewHops:
		return "fewer hops than trusted proxies"
	case OutcomeTooManyHops:
		return "too many hops" + in
	case OutcomeHeaderTooLarge:
		return "forwarding header too large" + in
	case OutcomeMultipleValues:
		return "several client addresses" + in
	case OutcomeNotAllowed:
		return "the client address is not in an allowed source range"
	case OutcomeUnresolved:
		return "the client address could not be determined"
	}
	return "the client address could not be determined"
}
