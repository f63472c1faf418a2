package middleware

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

func chain(e error) error { return &clientip.ChainError{Hop: 1, Header: "X-Forwarded-For", Err: e} }

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil", nil, OutcomeResolved},
		{"masqueraded, bare as Resolve returns it", clientip.ErrMasqueraded, OutcomeMasqueraded},
		{"not allowed", ErrNotAllowed, OutcomeNotAllowed},
		{"policy verdict wins over its cause", fmt.Errorf("%w: %w", ErrUnresolved, chain(clientip.ErrMalformed)), OutcomeUnresolved},
		{"policy masquerade", fmt.Errorf("%w: %w", ErrMasqueraded, chain(clientip.ErrMasqueraded)), OutcomeMasqueraded},
		{"no result", ErrNoResult, OutcomeUnresolved},
		{"anything else", errors.New("boom"), OutcomeError},
		{"a configuration error is not a resolution failure", clientip.ErrInvalidConfig, OutcomeError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, OutcomeOf(tc.err))
		})
	}
}

// TestOutcomeOfReasons: every clientip Reason is an Outcome of its own, named
// as clientip names it, without this package listing them.
func TestOutcomeOfReasons(t *testing.T) {
	seen := map[Outcome]bool{}
	n := 0
	for r := clientip.ReasonNone + 1; r.Err() != nil; r++ {
		o := OutcomeOf(chain(r.Err()))
		assert.Equal(t, r.String(), o.String(), "the Outcome of %v", r)
		assert.False(t, seen[o], "two Reasons share %v", o)
		seen[o] = true
		n++
	}
	assert.Equal(t, int(clientip.ReasonMultipleValues), n, "every Reason is counted")
	assert.Equal(t, "malformed", OutcomeOf(chain(clientip.ErrMalformed)).String())
	assert.Equal(t, OutcomeMasqueraded, OutcomeOf(chain(clientip.ErrMasqueraded)))
}

func TestOutcomeText(t *testing.T) {
	for o := Outcome(0); o < outcomeReasons+Outcome(clientip.ReasonMultipleValues); o++ {
		b, err := o.MarshalText()
		require.NoError(t, err, "Outcome %d", o)
		assert.Equal(t, o.String(), string(b))
		var back Outcome
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, o, back)
		if o != OutcomeResolved {
			assert.NotEmpty(t, o.explain(""), "%s has no explanation", o)
		}
	}
	bad := outcomeReasons + Outcome(clientip.ReasonMultipleValues)
	_, err := bad.MarshalText()
	assert.Error(t, err, "a value past the last Outcome")
	assert.Equal(t, fmt.Sprintf("Outcome(%d)", bad), bad.String())
	var o Outcome
	assert.Error(t, o.UnmarshalText([]byte("Resolved")), "names are exact")
	assert.Error(t, o.UnmarshalText([]byte("none")), "clientip's ReasonNone is not an Outcome")
}

func TestOutcomeOfAllocs(t *testing.T) {
	err := fmt.Errorf("%w: %w", ErrUnresolved, chain(clientip.ErrMalformed))
	assert.Zero(t, testing.AllocsPerRun(100, func() { OutcomeOf(err) }), "OutcomeOf allocates")
}
