package otelsourceip

import (
	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// How many sources and outcomes have names: the measurement options are
// built for each. The enums are numbered densely from zero and MarshalText
// refuses the first value without a name, so a Source or an Outcome that
// clientip or middleware adds (every clientip.Reason is an Outcome) is
// counted here without a change to this package.
var (
	numSources  = named[clientip.Source]()
	numOutcomes = named[middleware.Outcome]()
)

func named[T interface {
	~uint8
	MarshalText() ([]byte, error)
}]() int {
	n := 0
	for n < 256 {
		if _, err := T(n).MarshalText(); err != nil {
			break
		}
		n++
	}
	return n
}

// sourceIndex is s as an index of the measurement options; a Source without
// a name (never returned by clientip) counts as SourceNone.
func sourceIndex(s clientip.Source) int {
	if int(s) < numSources {
		return int(s)
	}
	return int(clientip.SourceNone)
}

// outcomeIndex is o as an index of the measurement options; an Outcome
// without a name (never returned by OutcomeOf) counts as OutcomeError.
func outcomeIndex(o middleware.Outcome) int {
	if int(o) < numOutcomes {
		return int(o)
	}
	return int(middleware.OutcomeError)
}
