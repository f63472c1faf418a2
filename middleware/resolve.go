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
	// and there is no safe default for it.
	Trust clientip.Trust

	// OnError writes the response to a request whose client cannot be
	// resolved, with the Result (which says where the walk stopped) and the
	// error, a *clientip.ChainError wrapping one of clientip's sentinels. The
	// request goes no further. Nil means a 400 Bad Request with a short
	// plain-text reason naming the kind of failure and the configured header,
	// never anything the client wrote.
	//
	// [clientip.ErrMasqueraded] is not an error here: the request goes on with
	// the flagged Result in its context, and a [SourceRanges] policy refuses it.
	OnError func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error)

	// SetRemoteAddr is an opt-in for legacy code that reads r.RemoteAddr as the
	// client: the next handler then sees a shallow copy of the request whose
	// RemoteAddr is the client with its port, as [clientip.Result.ClientAddrPort]
	// gives it ("203.0.113.7:0" when the client came from a header, whose
	// entries carry no usable port). The caller's request is never modified. It
	// costs one allocation per request, and the socket peer is then only
	// known from the Result (Result.Peer). False (the default) leaves
	// RemoteAddr as the server set it.
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
// a [SourceRanges] policy, or check Result.Masqueraded, where it matters.
//
// For PROXY protocol, serve from a proxyproto.Listener given the same Trust,
// with http.Server.ConnContext set to proxyproto.ConnContext: the resolver
// then sees the PROXY source and keeps the load balancer as the socket peer.
//
// The middleware makes two allocations per request (the context node that
// holds the Result, and the request copy) and one more with SetRemoteAddr.
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
	res, err := h.cfg.Trust.Resolver().ResolveRequest(r)
	if err != nil && !errors.Is(err, clientip.ErrMasqueraded) {
		if h.cfg.Observer != nil {
			h.cfg.Observer.ObserveResolve(r.Context(), res, err)
		}
		h.cfg.OnError(w, r, res, err)
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

// badRequest is the default Config.OnError.
func badRequest(w http.ResponseWriter, _ *http.Request, res clientip.Result, err error) {
	http.Error(w, "cannot determine the client address: "+OutcomeOf(err).explain(res.Header), http.StatusBadRequest)
}
