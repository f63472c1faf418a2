package middleware

import (
	"fmt"
	"net/http"

	"github.com/sourceip/sourceip/clientip"
)

// SourceRangesConfig configures the allowlist [NewSourceRanges] returns.
type SourceRangesConfig struct {
	// Allow is the set of client addresses admitted. It must not be empty;
	// admit every address with 0.0.0.0/0 and ::/0.
	Allow clientip.PrefixSet

	// OnDeny writes the response to a refused request, as
	// PolicyConfig.OnDeny. Nil means the Policy's default.
	OnDeny func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error)

	// Observer, when not nil, is told of each refused request through
	// ObserveDeny; see [Observer]. Nil observes nothing.
	Observer Observer
}

// SourceRangesRule is the name of the one rule of the policy
// [NewSourceRanges] returns.
const SourceRangesRule = "source-ranges"

// NewSourceRanges returns the simplest [Policy]: the application's
// counterpart of a Kubernetes Service's loadBalancerSourceRanges, which
// admits only clients whose resolved address lies in cfg.Allow, whatever the
// target, refusing unresolved and masqueraded clients. Its one rule, the
// Default, is named "source-ranges". It is NewPolicy with
//
//	PolicyConfig{Default: Rule{Name: "source-ranges", Allow: cfg.Allow}, OnDeny: cfg.OnDeny, Observer: cfg.Observer}
//
// and the target given to its Check does not matter ("" will do).
//
// It returns an error wrapping [ErrInvalidConfig] when cfg.Allow is empty:
// such a policy would refuse every client, which is what an unset list of
// ranges (an empty flag or environment variable) looks like, not a policy
// anyone mounts. A policy that must refuse everyone is the zero Policy.
func NewSourceRanges(cfg SourceRangesConfig) (*Policy, error) {
	if cfg.Allow.Len() == 0 {
		return nil, fmt.Errorf("%w: SourceRangesConfig.Allow is empty, so the policy would refuse every client", ErrInvalidConfig)
	}
	return NewPolicy(PolicyConfig{
		Default:  Rule{Name: SourceRangesRule, Allow: cfg.Allow},
		OnDeny:   cfg.OnDeny,
		Observer: cfg.Observer,
	})
}
