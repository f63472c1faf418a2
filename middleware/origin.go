package middleware

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// OriginConfig configures the origin middleware [NewOrigin] returns.
type OriginConfig struct {
	// Reader reads each request's origin: which headers the trusted proxies
	// write, and which hosts the service answers to. It is required.
	Reader *clientip.OriginReader

	// Apply makes the next handler see the origin in the request itself:
	// a shallow copy whose URL.Scheme, URL.Host and Host are the origin's,
	// so that redirects, absolute links and http.CrossOriginProtection
	// (which compares the Origin header with Host) use what the client
	// used. TLS, RemoteAddr and the path are left alone: the prefix a proxy
	// removed is only in the stored Origin. The caller's request and URL
	// are never modified. False (the default) only stores the Origin in the
	// context.
	Apply bool

	// OnError writes the response to a request whose origin cannot be read,
	// with the Result and the error: a *clientip.ChainError wrapping one of
	// clientip's origin sentinels, or [ErrNoResult] when the request did not
	// pass through the resolve middleware first. The request goes no
	// further. Nil means 400 Bad Request with a short plain-text reason
	// naming the kind of failure and the header, never anything the client
	// wrote; and 500 for ErrNoResult, a wiring mistake.
	OnError func(w http.ResponseWriter, r *http.Request, res clientip.Result, err error)
}

// NewOrigin returns a middleware that reads each request's origin (the
// scheme, host, port and path prefix the client used) with cfg.Reader, from
// the headers written by the trusted hop that reported the client, and
// stores it in the request's context, where handlers read it with
// [clientip.OriginFromContext]. Mount it inside the resolve middleware [New],
// whose Result it reads:
//
//	resolve(origin(app))
//
// A request whose origin cannot be read is answered by cfg.OnError and goes
// no further: there is no fallback to the request's own Host or scheme.
// With cfg.Apply, the next handler sees the origin in the request's URL and
// Host.
//
// Behind an L4 load balancer that terminates TLS and says so in the PROXY
// v2 SSL TLV, a client the PROXY header named gets https: see [ReadOrigin].
//
// It makes two allocations per request (the context node and the request
// copy), two more with Apply (the URL copy and, with a port, the host
// text). It is safe for concurrent use. NewOrigin returns an error wrapping
// [ErrInvalidConfig] when cfg.Reader is nil.
func NewOrigin(cfg OriginConfig) (func(http.Handler) http.Handler, error) {
	if cfg.Reader == nil {
		return nil, fmt.Errorf("%w: Reader is required", ErrInvalidConfig)
	}
	if cfg.OnError == nil {
		cfg.OnError = originError
	}
	return func(next http.Handler) http.Handler {
		return &originHandler{cfg: cfg, next: next}
	}, nil
}

type originHandler struct {
	cfg  OriginConfig
	next http.Handler
}

func (h *originHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, _ := clientip.FromContext(r.Context())
	o, err := ReadOrigin(h.cfg.Reader, r)
	if err != nil {
		h.cfg.OnError(w, r, res, err)
		return
	}
	r = r.WithContext(clientip.NewOriginContext(r.Context(), o))
	if h.cfg.Apply {
		u := *r.URL
		u.Scheme, u.Host = o.Scheme, o.HostPort()
		r.URL, r.Host = &u, u.Host
	}
	h.next.ServeHTTP(w, r)
}

// ReadOrigin reads r's origin with reader, for the client that the resolve
// middleware [New] stored in r's context, without storing or applying it.
// It reports [ErrNoResult] when r did not pass through that middleware.
//
// The request arrived over TLS when r.TLS is set, or when the client is the
// source of a PROXY header (proxyproto.ConnContext stored its facts) whose
// v2 SSL TLV says the client's connection used TLS: the load balancer that
// reported the client also terminated its TLS. It never modifies r.
func ReadOrigin(reader *clientip.OriginReader, r *http.Request) (clientip.Origin, error) {
	res, ok := clientip.FromContext(r.Context())
	if !ok {
		return clientip.Origin{}, ErrNoResult
	}
	tls := r.TLS != nil
	if !tls && res.Source == clientip.SourceProxyProtocol {
		if f, ok := proxyproto.FactsFromContext(r.Context()); ok {
			if ssl, ok := f.TLVs.SSL(); ok && ssl.TLS() {
				tls = true
			}
		}
	}
	return reader.Read(res, r.Header, tls, r.Host)
}

// originError is the default OriginConfig.OnError.
func originError(w http.ResponseWriter, _ *http.Request, _ clientip.Result, err error) {
	if errors.Is(err, ErrNoResult) {
		http.Error(w, "the origin middleware runs without the resolve middleware", http.StatusInternalServerError)
		return
	}
	text := "the origin could not be determined"
	for _, e := range []error{clientip.ErrOriginMalformed, clientip.ErrOriginAmbiguous, clientip.ErrOriginMissing, clientip.ErrHostNotAllowed} {
		if errors.Is(err, e) {
			// The sentinel's text without its "clientip: " prefix.
			_, text, _ = strings.Cut(e.Error(), ": ")
			break
		}
	}
	var ce *clientip.ChainError
	if errors.As(err, &ce) && ce.Header != "" {
		text += " in " + ce.Header
	}
	http.Error(w, "cannot determine the request's origin: "+text, http.StatusBadRequest)
}
