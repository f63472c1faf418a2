package middleware

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sourceip/sourceip/clientip"
)

func TestOutcomeOf(t *testing.T) {
	chain := func(e error) error { return &clientip.ChainError{Hop: 1, Header: "X-Forwarded-For", Err: e} }
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil", nil, OutcomeResolved},
		{"masqueraded", chain(clientip.ErrMasqueraded), OutcomeMasqueraded},
		{"no address", chain(clientip.ErrNoAddress), OutcomeNoAddress},
		{"malformed", chain(clientip.ErrMalformed), OutcomeMalformed},
		{"unknown hop", chain(clientip.ErrUnknownHop), OutcomeUnknownHop},
		{"unspecified", chain(clientip.ErrUnspecified), OutcomeUnspecified},
		{"all trusted", chain(clientip.ErrAllTrusted), OutcomeAllTrusted},
		{"too few hops", chain(clientip.ErrTooFewHops), OutcomeTooFewHops},
		{"too many hops", chain(clientip.ErrTooManyHops), OutcomeTooManyHops},
		{"header too large", chain(clientip.ErrHeaderTooLarge), OutcomeHeaderTooLarge},
		{"multiple values", chain(clientip.ErrMultipleValues), OutcomeMultipleValues},
		{"not allowed", ErrNotAllowed, OutcomeNotAllowed},
		{"policy verdict wins over its cause", fmt.Errorf("%w: %w", ErrUnresolved, chain(clientip.ErrMalformed)), OutcomeUnresolved},
		{"policy masquerade", fmt.Errorf("%w: %w", ErrMasqueraded, chain(clientip.ErrMasqueraded)), OutcomeMasqueraded},
		{"no result", ErrNoResult, OutcomeUnresolved},
		{"anything else", errors.New("boom"), OutcomeError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := OutcomeOf(tc.err); got != tc.want {
				t.Errorf("OutcomeOf(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestOutcomeText(t *testing.T) {
	for o := OutcomeResolved; o <= OutcomeError; o++ {
		b, err := o.MarshalText()
		if err != nil || string(b) != o.String() {
			t.Errorf("%d: MarshalText = %q, %v", o, b, err)
		}
		var back Outcome
		if err := back.UnmarshalText(b); err != nil || back != o {
			t.Errorf("%s: UnmarshalText = %v, %v", b, back, err)
		}
		if o != OutcomeResolved && o.reason("") == "" {
			t.Errorf("%s has no reason", o)
		}
	}
	bad := OutcomeError + 1
	if _, err := bad.MarshalText(); err == nil || bad.String() != "Outcome(14)" {
		t.Errorf("out of range: %q, %v", bad.String(), err)
	}
	var o Outcome
	if err := o.UnmarshalText([]byte("Resolved")); err == nil {
		t.Error("UnmarshalText is case-insensitive; names are exact")
	}
}
