package middleware

import (
	"errors"
	"log/slog"
)

// Decision is what a [Policy] decided about one client for one target: the
// rule that decided and its verdict. It is a small comparable value; the zero
// Decision admits under no rule and is never returned by a Policy.
type Decision struct {
	// Rule is the name of the rule that decided: one of the policy's Rules,
	// or its Default (named "default" unless configured otherwise). It is
	// "" only when the target was invalid (a malformed MQTT topic), which
	// no rule judges. Rule names are configuration, never client input, so
	// they fit metric attributes.
	Rule string

	// Err is nil when the client is admitted, and otherwise a *[Denial]
	// that wraps [ErrNotAllowed] (or [ErrDenied], which wraps it),
	// [ErrUnresolved] or [ErrMasqueraded].
	Err error
}

// Allowed reports whether d admits the client.
func (d Decision) Allowed() bool { return d.Err == nil }

// Outcome returns the [Outcome] of d.Err: OutcomeResolved when d admits.
func (d Decision) Outcome() Outcome { return OutcomeOf(d.Err) }

// LogValue renders d as a group of "rule" and "decision" (its Outcome).
func (d Decision) LogValue() slog.Value {
	return slog.GroupValue(slog.String("rule", d.Rule), slog.String("decision", d.Outcome().String()))
}

// Denial is the error a [Policy] returns when it refuses a client: the rule
// that refused it, the verdict, and what caused it when the client was not
// resolved. Test the verdict with errors.Is (ErrNotAllowed, ErrDenied,
// ErrUnresolved, ErrMasqueraded; clientip's sentinel of the cause matches
// too) and read the rule with errors.As or [RuleOf].
type Denial struct {
	// Rule is the name of the rule that refused, "" for an invalid target.
	Rule string

	// Verdict is ErrNotAllowed, ErrDenied (a client in the rule's Deny),
	// ErrUnresolved or ErrMasqueraded.
	Verdict error

	// Cause is the resolution error that made the client unresolved, or
	// [ErrInvalidTarget]; nil otherwise.
	Cause error
}

// Error returns the verdict with the rule, then the cause, such as
// "middleware: client address not in an allowed source range (rule admin)".
// The cause's text may quote, truncated, a header entry the client wrote.
func (d *Denial) Error() string {
	rule := "rule " + d.Rule
	if d.Rule == "" {
		rule = "no rule"
	}
	s := d.Verdict.Error() + " (" + rule + ")"
	if d.Cause != nil {
		s += ": " + d.Cause.Error()
	}
	return s
}

// Unwrap returns the verdict. The cause is matched by Is and As, so that
// errors.Is and errors.As reach both without allocating.
func (d *Denial) Unwrap() error { return d.Verdict }

// Is reports whether the cause matches target, for errors.Is.
func (d *Denial) Is(target error) bool { return d.Cause != nil && errors.Is(d.Cause, target) }

// As finds the first error in the cause's tree that matches target, for
// errors.As.
func (d *Denial) As(target any) bool { return d.Cause != nil && errors.As(d.Cause, target) }

// RuleOf returns the name of the rule a [Denial] in err's tree names (as
// errors.Is walks it), and whether there is one. It does not allocate.
func RuleOf(err error) (string, bool) {
	for err != nil {
		switch e := err.(type) {
		case *Denial:
			return e.Rule, true
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if rule, ok := RuleOf(inner); ok {
					return rule, true
				}
			}
			return "", false
		default:
			return "", false
		}
	}
	return "", false
}
