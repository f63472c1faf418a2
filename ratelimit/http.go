package ratelimit

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// HTTPConfig configures an [HTTP] rate limiter.
type HTTPConfig struct {
	// Trust resolves each request's client (see [clientip.Trust]; a
	// *clientip.Resolver is a static Trust). Required: it holds the trust
	// configuration, and there is no safe default for it.
	Trust clientip.Trust

	// Store holds the buckets: a [*Limiter] for one process, or a shared
	// store for a service with several replicas. Required.
	Store Store

	// Keyer turns the client into its bucket's key; the zero Keyer keys
	// IPv4 clients by address and IPv6 clients by /64 (6to4, Teredo and
	// NAT64 clients by the IPv4 address they carry).
	Keyer clientip.Keyer

	// Name is the policy's name in the RateLimit fields; "" means
	// "default". See [ValidPolicyName].
	Name string

	// Identity, when not nil, narrows each client's bucket to one per
	// (key, identity). It must return an identity the client cannot choose
	// freely — a verified API key or client certificate, never a header or
	// parameter taken on trust — or a client escapes its limit by minting
	// identities. Nil: one bucket per key.
	Identity func(r *http.Request, res clientip.Result) string

	// RefuseMasqueraded refuses requests whose client resolved to a
	// masquerading node ([clientip.ErrMasqueraded]) with OnUnresolved. When
	// false (the default) such requests are limited on the node's key: every
	// client behind that node shares one bucket. That never lets a client
	// escape its limit, but one busy client can use up the bucket of the
	// others behind the same node; refusing them would deny all of them
	// anyway, so sharing is the default. Fix the cause (externalTrafficPolicy:
	// Local, or a PROXY header from the load balancer) where it matters.
	RefuseMasqueraded bool

	// OnUnresolved writes the response to a request whose client cannot be
	// resolved (err wraps one of clientip's sentinels), or is masqueraded
	// while RefuseMasqueraded is set. The request goes no further and takes
	// no token. Nil means 400 Bad Request (403 Forbidden for a refused
	// masqueraded client) with a short plain-text reason.
	OnUnresolved func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error)

	// OnLimited writes the response to a request the limit refuses; the
	// RateLimit fields and Retry-After are already set. Nil means 429 Too
	// Many Requests with a short plain-text body.
	OnLimited func(w http.ResponseWriter, r *http.Request, d Decision)

	// OnError writes the response when the Store could not decide (a
	// shared store that fails closed during an outage: err wraps
	// [ErrUnavailable]). Nil means 503 Service Unavailable.
	OnError func(w http.ResponseWriter, r *http.Request, err error)

	// QuietWhenAllowed leaves the RateLimit fields off responses to allowed
	// requests; refusals always carry them. False (the default) sets them on
	// every response the middleware passes on.
	QuietWhenAllowed bool

	// Observer, when not nil, is told the outcome of each resolution
	// Handler makes, with ObserveResolve, before the request is keyed,
	// refused or passed on; see [middleware.Observer]. With
	// otelsourceip's Instrumentation this counts the resolution and sets
	// client.address on the request's span to the resolved client (or
	// clears it when there is none), replacing otelhttp's leftmost
	// X-Forwarded-For entry, which the client wrote. Leave it nil when a
	// resolve middleware or policy with an Observer already runs in front
	// (the resolution would be observed twice). Check observes nothing.
	// Nil observes nothing.
	Observer middleware.Observer
}

// HTTP limits HTTP requests per resolved client. Its [HTTP.Handler] is a
// middleware with the shape chi and most routers use; [HTTP.Check] is the
// same decision as a pure function of the request.
//
// It resolves each request's client itself, from the request and
// HTTPConfig.Trust (resolution does not allocate), and passes the request
// on unchanged: no copy, no context value. Behind a server whose
// ConnContext is middleware.ConnContext, the connection's layers are found
// with one context lookup and r.RemoteAddr is not parsed; the Trust is
// still HTTPConfig.Trust's. A resolution a policy in front of it holds for
// the request is reused, and the limiter holds its own for the handlers it
// runs (clientip.HoldRequest), so that clientip.FromRequest there costs no
// second walk when the connection carries the same Trust. It is safe for
// concurrent use.
type HTTP struct {
	cfg    HTTPConfig
	fields fieldCache
}

// NewHTTP returns an HTTP limiter for cfg, or an error wrapping
// [ErrInvalidConfig] when cfg.Trust or cfg.Store is missing, the Store's
// Limit is invalid, or cfg.Name is not a valid policy name.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	if cfg.Trust == nil || cfg.Store == nil {
		return nil, fmt.Errorf("%w: Trust and Store are required", ErrInvalidConfig)
	}
	if cfg.Trust.Resolver() == nil { // a *clientip.Store never set, say
		return nil, fmt.Errorf("%w: Trust has no resolver", ErrInvalidConfig)
	}
	lim := cfg.Store.Limit()
	if err := lim.Valid(); err != nil {
		return nil, fmt.Errorf("the Store's limit: %w", err)
	}
	if cfg.Name == "" {
		cfg.Name = "default"
	}
	if err := ValidPolicyName(cfg.Name); err != nil {
		return nil, err
	}
	if err := cfg.Keyer.Valid(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.OnUnresolved == nil {
		cfg.OnUnresolved = unresolved
	}
	if cfg.OnLimited == nil {
		cfg.OnLimited = limited
	}
	if cfg.OnError == nil {
		cfg.OnError = unavailable
	}
	return &HTTP{cfg: cfg, fields: newFieldCache(cfg.Name, lim)}, nil
}

// resolve is the limiter's one call into client resolution. It holds the
// answer for the handlers the limiter runs (see clientip.HoldRequest);
// release it when they return.
func (h *HTTP) resolve(r *http.Request) clientip.Held {
	return clientip.HoldRequest(r, h.cfg.Trust)
}

// key returns the bucket of the request's client, or false when the
// request must be refused as unresolved.
func (h *HTTP) key(r *http.Request, res clientip.Result, err error) (Key, bool) {
	if err != nil && (h.cfg.RefuseMasqueraded || !errors.Is(err, clientip.ErrMasqueraded)) {
		return Key{}, false
	}
	k, ok := KeyFor(h.cfg.Keyer, res.Client)
	if ok && h.cfg.Identity != nil {
		k.Identity = h.cfg.Identity(r, res)
	}
	return k, ok
}

// Check decides whether r may pass: it resolves r's client and takes a
// token from its bucket. The error wraps [ErrUnresolved] and clientip's
// sentinel when the client cannot be resolved (or is masqueraded and
// HTTPConfig.RefuseMasqueraded is set); otherwise it is the Store's. Check
// writes nothing.
func (h *HTTP) Check(r *http.Request) (Decision, error) {
	held := h.resolve(r)
	held.Release()
	res, err := held.Result, held.Err
	k, ok := h.key(r, res, err)
	if !ok {
		if err == nil {
			err = errInvalidKey
		}
		return Decision{}, fmt.Errorf("%w: %w", ErrUnresolved, err)
	}
	return h.cfg.Store.Take(r.Context(), k, time.Now(), 1, 0)
}

// Handler returns next behind the limit: a request that is allowed goes to
// next as it came, with the RateLimit fields set on its response (unless
// HTTPConfig.QuietWhenAllowed); one that is refused is answered by
// OnLimited, with the fields and Retry-After. A request whose client cannot
// be resolved goes to OnUnresolved, and one the Store cannot decide to
// OnError. Handler has the shape of a chi middleware:
// router.Use(limiter.Handler).
//
// An allowed request on a key the Store already holds costs no allocation
// with a [*Limiter] store (the fields are set from a table made once).
func (h *HTTP) Handler(next http.Handler) http.Handler {
	return &httpHandler{h: h, next: next}
}

type httpHandler struct {
	h    *HTTP
	next http.Handler
}

func (hh *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := hh.h
	held := h.resolve(r)
	defer held.Release()
	res, err := held.Result, held.Err
	if h.cfg.Observer != nil {
		h.cfg.Observer.ObserveResolve(r.Context(), res, err)
	}
	k, ok := h.key(r, res, err)
	if !ok {
		if err == nil {
			err = errInvalidKey
		}
		h.cfg.OnUnresolved(w, r, res, err)
		return
	}
	d, err := h.cfg.Store.Take(r.Context(), k, time.Now(), 1, 0)
	if err != nil {
		h.cfg.OnError(w, r, err)
		return
	}
	if !d.Allowed || !h.cfg.QuietWhenAllowed {
		h.fields.set(w.Header(), h.cfg.Name, d)
	}
	if !d.Allowed {
		h.cfg.OnLimited(w, r, d)
		return
	}
	hh.next.ServeHTTP(w, r)
}

// errInvalidKey is reported for a resolved client the Keyer cannot key (it
// cannot happen with a Keyer that NewHTTP accepted; kept as a guard).
var errInvalidKey = errors.New("ratelimit: the client address has no rate-limit key")

func unresolved(w http.ResponseWriter, _ *http.Request, _ clientip.Result, err error) {
	if errors.Is(err, clientip.ErrMasqueraded) {
		http.Error(w, "the client address was masqueraded by a node and cannot be rate limited", http.StatusForbidden)
		return
	}
	http.Error(w, "cannot determine the client address", http.StatusBadRequest)
}

func limited(w http.ResponseWriter, _ *http.Request, _ Decision) {
	http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
}

func unavailable(w http.ResponseWriter, _ *http.Request, _ error) {
	http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
}
