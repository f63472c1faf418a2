package middleware

import (
	"context"

	"github.com/sourceip/sourceip/clientip"
)

// Observer is told the outcome of each resolution and each policy denial:
// the place for metrics, traces and logs. The otelsourceip subpackage and
// [LogObserver] implement it.
//
// ObserveResolve is called once per request by the middlewares [New] and
// [RequireClient] return, before the request goes on or is refused, with
// the Result and the error of the resolution; ctx is the request's context,
// and behind New, on success (or [clientip.ErrMasqueraded]), it already
// carries the Result. ObserveDeny is called by [Policy.Handler] once per
// refused request, with the Result the policy judged and the *[Denial]
// [Policy.Check] returned. Code that resolves connections itself
// ([ResultFromConn], [Policy.Decide]) calls the methods directly.
//
// Both run on the request's goroutine and should return promptly. They must
// not keep the context or write to the response. Implementations must be safe
// for concurrent use. Hooks added later will be optional interfaces, checked
// with a type assertion, so an implementation of this interface keeps
// compiling.
type Observer interface {
	ObserveResolve(ctx context.Context, res clientip.Result, err error)
	ObserveDeny(ctx context.Context, res clientip.Result, err error)
}

// DecisionObserver is an optional interface of an [Observer]:
// [Policy.Handler] and [Policy.Serve] tell it of every decision, admitted or
// refused, with the Result judged and the rule that made it, before
// ObserveDeny for a refusal. Code that judges
// connections itself ([Policy.Decide]) calls it directly. The same rules as
// for Observer apply.
type DecisionObserver interface {
	ObserveDecision(ctx context.Context, res clientip.Result, d Decision)
}
