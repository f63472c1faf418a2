package middleware

import (
	"errors"
	"strings"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/enumtext"
)

// Outcome classifies how a resolution or a policy check ended, in a small
// fixed set of names fit for log fields and metric attributes: it never holds
// an address or anything a client wrote.
//
// An Outcome is one of the constants below, or the [clientip.Reason] of a
// failed resolution under that Reason's name ("malformed", "all_trusted",
// …). clientip's list of reasons is the only list of resolution failures:
// this package adds its policy's verdicts and nothing else.
type Outcome uint8

const (
	// OutcomeResolved: a client was named (and, for a policy, admitted).
	OutcomeResolved Outcome = iota
	// OutcomeNotAllowed: a policy refused a client outside its ranges ([ErrNotAllowed]).
	OutcomeNotAllowed
	// OutcomeUnresolved: a policy refused a client that was not resolved
	// ([ErrUnresolved]), or no resolution was recorded ([ErrNoResult]).
	OutcomeUnresolved
	// OutcomeError: an error that is neither a policy's nor clientip's.
	OutcomeError

	// outcomeReasons is where the Outcomes of clientip's Reasons begin: the
	// Outcome of Reason r is outcomeReasons + r - 1.
	outcomeReasons
)

// OutcomeMasqueraded is the Outcome of [clientip.ReasonMasqueraded]: the
// result is a masquerading node ([clientip.ErrMasqueraded], [ErrMasqueraded]).
const OutcomeMasqueraded = outcomeReasons + Outcome(clientip.ReasonMasqueraded) - 1

// outcomeNames are the names of every Outcome, indexed by value: this
// package's own, then clientip's Reasons in their order.
var outcomeNames = func() []string {
	names := []string{
		OutcomeResolved:   "resolved",
		OutcomeNotAllowed: "not_allowed",
		OutcomeUnresolved: "unresolved",
		OutcomeError:      "error",
	}
	for r := clientip.Reason(1); r.Err() != nil; r++ {
		names = append(names, r.String())
	}
	return names
}()

// outcomeOfReason returns the Outcome of a Reason other than ReasonNone.
func outcomeOfReason(r clientip.Reason) Outcome { return outcomeReasons + Outcome(r) - 1 }

// reason returns the clientip Reason o stands for, or ReasonNone.
func (o Outcome) reason() clientip.Reason {
	if o < outcomeReasons || int(o) >= len(outcomeNames) {
		return clientip.ReasonNone
	}
	return clientip.Reason(o - outcomeReasons + 1)
}

// OutcomeOf classifies err, an error returned by [clientip.Resolver.Resolve],
// [ResultFromConn] or [Policy.Check]: nil is OutcomeResolved, a policy
// error is classified by the policy's verdict (OutcomeNotAllowed,
// OutcomeUnresolved or OutcomeMasqueraded) rather than by its cause, and a
// resolution error by its [clientip.ReasonOf]. It does not allocate.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return OutcomeResolved
	}
	r := clientip.ReasonOf(err)
	switch {
	case errors.Is(err, ErrNotAllowed):
		return OutcomeNotAllowed
	case r == clientip.ReasonMasqueraded:
		return OutcomeMasqueraded
	case errors.Is(err, ErrUnresolved), errors.Is(err, ErrNoResult):
		return OutcomeUnresolved
	case r != clientip.ReasonNone:
		return outcomeOfReason(r)
	}
	return OutcomeError
}

// String returns the Outcome's name: "resolved", "not_allowed",
// "unresolved", "error", or the name of the [clientip.Reason] it stands for.
func (o Outcome) String() string { return enumtext.String(outcomeNames, o, "Outcome") }

// MarshalText implements [encoding.TextMarshaler] with the names String returns.
func (o Outcome) MarshalText() ([]byte, error) {
	return enumtext.Marshal(outcomeNames, o, "Outcome", errUnknownName)
}

// UnmarshalText implements [encoding.TextUnmarshaler] for the names String returns.
func (o *Outcome) UnmarshalText(text []byte) error {
	return enumtext.Unmarshal(o, outcomeNames, text, "Outcome", errUnknownName)
}

// explain is the short plain-text explanation written in a default 400 or
// 403 body. For a resolution failure it is the text of clientip's sentinel
// and the configured header; it never holds anything a client wrote.
func (o Outcome) explain(header string) string {
	switch o {
	case OutcomeMasqueraded:
		return "the client address was masqueraded by a node and cannot be verified"
	case OutcomeNotAllowed:
		return "the client address is not in an allowed source range"
	}
	if r := o.reason(); r != clientip.ReasonNone {
		// The sentinel's text without its "clientip: " prefix.
		_, text, _ := strings.Cut(r.Err().Error(), ": ")
		if header != "" {
			text += " in " + header
		}
		return text
	}
	return "the client address could not be determined"
}
