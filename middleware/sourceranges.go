package middleware

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sourceip/sourceip/clientip"
)

// SourceRangesConfig configures a [SourceRanges] policy.
type SourceRangesConfig struct {
	// Allow is the set of client addresses admitted. It must not be empty;
	// admit every address with 0.0.0.0/0 and ::/0.
	Allow clientip.PrefixSet

	// OnDeny writes the response to a refused request, with the Result the
	// policy judged and the error [SourceRanges.Check] returned. Nil means a
	// 403 Forbidden with a short plain-text reason.
	OnDeny func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error)

	// Observer, when not nil, is told of each refused request through
	// ObserveDeny; see [Observer]. Nil observes nothing.
	Observer Observer
}

// SourceRanges is the application's counterpart of a Kubernetes Service's
// loadBalancerSourceRanges: it admits only clients whose resolved address lies
// in configured ranges. Unlike a firewall rule on the load balancer, it judges
// the client the trust chain resolved, so it also works behind proxies and
// PROXY-protocol load balancers that hide the client from the network.
//
// It fails closed: a client that could not be resolved is refused, and so is
// a result flagged as masqueraded, whose address is a node standing in for a
// client that is lost (externalTrafficPolicy: Cluster); admitting it would
// admit everyone that node forwards. Internal origins on which every hop is
// trusted ([clientip.ErrAllTrusted]) are unresolved too.
//
// Use [SourceRanges.Handler] after the resolve middleware for HTTP, and
// [SourceRanges.Check] with [ResultFromConn] or [clientip.Resolver.Resolve]
// for MQTT and other protocols. A SourceRanges is immutable and safe for
// concurrent use. The zero SourceRanges admits nobody and answers 403.
type SourceRanges struct {
	allow    clientip.PrefixSet
	onDeny   func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error)
	observer Observer
}

// NewSourceRanges returns a policy for cfg, or an error wrapping
// [ErrInvalidConfig] when cfg.Allow is empty: such a policy would refuse
// every client, which is what an unset list of ranges (an empty flag or
// environment variable) looks like, not a policy anyone mounts. A policy that
// must refuse everyone is the zero SourceRanges.
func NewSourceRanges(cfg SourceRangesConfig) (*SourceRanges, error) {
	if cfg.Allow.Len() == 0 {
		return nil, fmt.Errorf("%w: SourceRangesConfig.Allow is empty, so the policy would refuse every client", ErrInvalidConfig)
	}
	p := &SourceRanges{allow: cfg.Allow, onDeny: cfg.OnDeny, observer: cfg.Observer}
	if p.onDeny == nil {
		p.onDeny = forbidden
	}
	return p, nil
}

// Allow returns the set of admitted client addresses.
func (p *SourceRanges) Allow() clientip.PrefixSet { return p.allow }

// Check judges a resolution, as returned by [clientip.Resolver.Resolve],
// [clientip.Resolver.ResolveRequest] or [ResultFromConn] (whose results can be
// passed straight in: p.Check(middleware.ResultFromConn(c))). It returns nil
// to admit, or:
//   - an error wrapping [ErrMasqueraded] when res is flagged as masqueraded
//     (whatever err is), wrapping err as well when there is one;
//   - an error wrapping [ErrUnresolved] and err when err is not nil, or
//     [ErrUnresolved] alone when res names no client;
//   - [ErrNotAllowed] when the client is outside the allowed ranges.
//
// It is pure: it looks at nothing but its arguments and the configured
// ranges. It does not allocate when it admits or returns ErrNotAllowed.
func (p *SourceRanges) Check(res clientip.Result, err error) error {
	if err == nil && !res.Masqueraded {
		if !res.Client.IsValid() {
			return ErrUnresolved
		}
		if !p.allow.Contains(res.Client) {
			return ErrNotAllowed
		}
		return nil
	}
	if res.Masqueraded || errors.Is(err, clientip.ErrMasqueraded) {
		if err == nil {
			return ErrMasqueraded
		}
		return fmt.Errorf("%w: %w", ErrMasqueraded, err)
	}
	return fmt.Errorf("%w: %w", ErrUnresolved, err)
}

// CheckRequest judges the Result the resolve middleware stored in r's
// context. A request that did not pass through it is refused with an error
// wrapping [ErrUnresolved] and [ErrNoResult].
func (p *SourceRanges) CheckRequest(r *http.Request) error {
	_, err := p.checkRequest(r)
	return err
}

func (p *SourceRanges) checkRequest(r *http.Request) (clientip.Result, error) {
	res, ok := clientip.FromContext(r.Context())
	if !ok {
		return res, errNoRequestResult
	}
	return res, p.Check(res, nil)
}

// Handler returns a handler that serves requests [SourceRanges.CheckRequest]
// admits with h and answers the others with the configured OnDeny, after
// telling the Observer. Mount it after the resolve middleware; on its own it
// refuses every request.
func (p *SourceRanges) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := p.checkRequest(r)
		if err != nil {
			if p.observer != nil {
				p.observer.ObserveDeny(r.Context(), res, err)
			}
			deny := p.onDeny
			if deny == nil { // a zero SourceRanges
				deny = forbidden
			}
			deny(w, r, res, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// forbidden is the default SourceRangesConfig.OnDeny.
func forbidden(w http.ResponseWriter, _ *http.Request, _ clientip.Result, err error) {
	http.Error(w, "forbidden: "+OutcomeOf(err).explain(""), http.StatusForbidden)
}
