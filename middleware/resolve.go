package middleware

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sourceip/sourceip/clientip"
)

// Config configures the resolve middleware [New] returns.
type Config struct {
	// Trust is the trust configuration each request's client is resolved
	// under: a *clientip.Resolver, or a *clientip.Store to change it while
	// serving. Hand the same value to every layer of the chain (the
	// proxyproto listener, NewListener). The middleware loads its resolver
	// once per request, so a request is resolved under one configuration
	// from start to end. It is required: it holds the trust configuration,
	// and there is no safe default for it. A Trust of its own whose
	// Resolver returns nil while serving is not resolved under: each such
	// request is refused with an error wrapping [clientip.ErrNoTrust] (500
	// by default), never a panic.
	Trust clientip.Trust

	// OnError writes the response to a request whose client cannot be
	// resolved, with the Result (which says where the walk stopped) and the
	// error, a *clientip.ChainError wrapping one of clientip's sentinels or
	// an error wrapping [clientip.ErrNoTrust]: behind [RequireClient]
	// without a Trust on a connection that carries none, or when Trust's
	// Resolver returned nil for the request. The request goes no
	// further. Nil means a 400 Bad Request with a short plain-text reason
	// naming the kind of failure and the configured header, never anything
	// the client wrote (500 Internal Server Error for ErrNoTrust, the
	// server's wiring mistake).
	//
	// [clientip.ErrMasqueraded] is not an error here: the request goes on with
	// the flagged Result in its context, and a [Policy] refuses it. With
	// SetRemoteAddr it is one: see there. The default answers it with 403
	// Forbidden, as a Policy does.
	OnError func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error)

	// SetRemoteAddr is an opt-in for legacy code that reads r.RemoteAddr as the
	// client: the next handler then sees a shallow copy of the request whose
	// RemoteAddr is the client with its port, as [clientip.Result.ClientAddrPort]
	// gives it ("203.0.113.7:0" when the client came from a header, whose
	// entries carry no usable port). The caller's request is never modified. It
	// costs one allocation per request, and the socket peer is then only
	// known from the Result (Result.Peer). False (the default) leaves
	// RemoteAddr as the server set it.
	//
	// A result flagged as masqueraded (Kubernetes externalTrafficPolicy:
	// Cluster: see [clientip.Result].Masqueraded) names a node that stands
	// in for a client who is lost, and code that reads RemoteAddr cannot see
	// the flag: with SetRemoteAddr such a request is refused by OnError with
	// the resolution's error, which wraps [clientip.ErrMasqueraded] (403 by
	// default), rather than passed on with the node's address, or the socket
	// peer's, in RemoteAddr for rate limiters and logs to take for the
	// client's. Where masqueraded requests must be served, leave
	// SetRemoteAddr unset and have handlers read the Result, whose
	// Masqueraded flag says what the address is.
	SetRemoteAddr bool

	// Observer, when not nil, is told the outcome of each resolution; see
	// [Observer]. Nil observes nothing.
	Observer Observer
}

// New returns a middleware with the shape chi and most routers use,
// func(http.Handler) http.Handler, that resolves each request's client once
// with the resolver cfg.Trust has in force and stores the [clientip.Result] in the request's context,
// where handlers read it with [clientip.FromContext]. It passes on a shallow
// copy of the request with the new context and never modifies the caller's
// request; r.RemoteAddr is left alone unless cfg.SetRemoteAddr is set.
//
// A request whose client cannot be resolved is answered by cfg.OnError and
// goes no further: there is no fallback to the socket peer or to the leftmost
// header entry. A result flagged as masqueraded is stored and passed on; mount
// a [Policy], or check Result.Masqueraded, where it matters. With
// cfg.SetRemoteAddr it is refused too, since RemoteAddr cannot carry the flag.
//
// For PROXY protocol, serve from a proxyproto.Listener given the same Trust,
// with http.Server.ConnContext set to proxyproto.ConnContext: the resolver
// then sees the PROXY source and keeps the load balancer as the socket peer.
//
// The middleware makes two allocations per request (the context node that
// holds the Result, and the request copy) and one more with SetRemoteAddr.
// [RequireClient] and [Policy.Handler] make none: they resolve on demand
// and pass the request on unchanged.
// It is safe for concurrent use. New returns an error wrapping
// [ErrInvalidConfig] when cfg.Trust is nil or returns a nil resolver.
func New(cfg Config) (func(http.Handler) http.Handler, error) {
	if cfg.Trust == nil || cfg.Trust.Resolver() == nil {
		return nil, fmt.Errorf("%w: Trust is required", ErrInvalidConfig)
	}
	if cfg.OnError == nil {
		cfg.OnError = badRequest
	}
	return func(next http.Handler) http.Handler {
		return &resolveHandler{cfg: cfg, next: next}
	}, nil
}

type resolveHandler struct {
	cfg  Config
	next http.Handler
}

func (h *resolveHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rv := h.cfg.Trust.Resolver()
	if rv == nil {
		h.cfg.refuse(w, r, clientip.Result{}, errRequestNilResolver)
		return
	}
	res, err := rv.ResolveRequest(r)
	if h.cfg.refuse(w, r, res, err) {
		return
	}
	ctx := clientip.NewContext(r.Context(), res)
	if h.cfg.Observer != nil {
		h.cfg.Observer.ObserveResolve(ctx, res, err)
	}
	r = r.WithContext(ctx)
	if h.cfg.SetRemoteAddr {
		r.RemoteAddr = res.ClientAddrPort().String()
	}
	h.next.ServeHTTP(w, r)
}

// RequireClient returns a middleware that resolves each request's client on
// demand and refuses the requests whose client cannot be resolved, as [New]
// does, but passes the others on unchanged: no copy of the request, no
// context value, no allocation. Handlers behind it read the client with
// [clientip.FromRequest], which, while they run, returns the resolution
// RequireClient made ([clientip.HoldRequest]); use [New] when handlers
// should find one stored Result in the context, or SetRemoteAddr is
// needed.
//
// cfg.Trust, when set, is the trust requests are resolved under, from their
// connection's layers when [ConnContext] stored them and from r.RemoteAddr
// otherwise. When nil, requests are resolved as clientip.FromRequest does,
// under the trust their connection carries: serve with
// http.Server.ConnContext set to [ConnContext]; a request whose connection
// carries no trust is refused with [clientip.ErrNoTrust] (by default with
// 500 Internal Server Error), never served with a guess.
//
// A result flagged as masqueraded is passed on; a [Policy] refuses it.
// cfg.OnError and cfg.Observer work as for New, except that the context
// ObserveResolve is given carries no Result. RequireClient returns an error
// wrapping [ErrInvalidConfig] when cfg.SetRemoteAddr is set, which needs a
// copy of the request, or cfg.Trust has no resolver.
func RequireClient(cfg Config) (func(http.Handler) http.Handler, error) {
	switch {
	case cfg.SetRemoteAddr:
		return nil, fmt.Errorf("%w: SetRemoteAddr needs a copy of the request; use New", ErrInvalidConfig)
	case cfg.Trust != nil && cfg.Trust.Resolver() == nil:
		return nil, fmt.Errorf("%w: Trust has no resolver", ErrInvalidConfig)
	}
	if cfg.OnError == nil {
		cfg.OnError = badRequest
	}
	return func(next http.Handler) http.Handler {
		return &requireHandler{cfg: cfg, next: next}
	}, nil
}

type requireHandler struct {
	cfg  Config
	next http.Handler
}

func (h *requireHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	held := clientip.HoldRequest(r, h.cfg.Trust)
	defer held.Release()
	res, err := held.Result, held.Err
	if h.cfg.refuse(w, r, res, err) {
		return
	}
	if h.cfg.Observer != nil {
		h.cfg.Observer.ObserveResolve(r.Context(), res, err)
	}
	h.next.ServeHTTP(w, r)
}

// refuse answers r with OnError, after telling the Observer, when err leaves
// it without a client (a masqueraded result only with SetRemoteAddr, which
// would write the node's address into RemoteAddr as the client's), and
// reports whether it did.
func (cfg *Config) refuse(w http.ResponseWriter, r *http.Request, res clientip.Result, err error) bool {
	if err == nil && !res.Masqueraded {
		return false
	}
	if res.Masqueraded || errors.Is(err, clientip.ErrMasqueraded) {
		if !cfg.SetRemoteAddr {
			return false
		}
		if err == nil {
			err = clientip.ErrMasqueraded
		}
	}
	if cfg.Observer != nil {
		cfg.Observer.ObserveResolve(r.Context(), res, err)
	}
	cfg.OnError(w, r, res, err)
	return true
}

// errRequestNilResolver is the error of a request whose configured Trust
// returned a nil resolver while serving: the server's configuration is at
// fault.
var errRequestNilResolver = fmt.Errorf("%w: the configured Trust returned a nil resolver", clientip.ErrNoTrust)

// badRequest is the default Config.OnError: 400 Bad Request, 500 for a
// server whose connections carry no trust, or 403 for a masqueraded client
// (refused with SetRemoteAddr), as a Policy answers it.
func badRequest(w http.ResponseWriter, _ *http.Request, res clientip.Result, err error) {
	switch {
	case errors.Is(err, clientip.ErrNoTrust):
		noTrust(w)
		return
	case errors.Is(err, clientip.ErrMasqueraded):
		http.Error(w, "forbidden: "+OutcomeMasqueraded.explain(""), http.StatusForbidden)
		return
	}
	http.Error(w, "cannot determine the client address: "+OutcomeOf(err).explain(res.Header), http.StatusBadRequest)
}

// noTrust answers a request on a connection that carries no trust: the
// server's wiring is at fault, not the client.
func noTrust(w http.ResponseWriter) {
	http.Error(w, "internal server error: the server cannot resolve client addresses", http.StatusInternalServerError)
}
