package clientip

import (
	"context"
	"net/http"
)

// connInfo is what one connection tells every request on it: its Transport,
// the Trust to resolve its requests under (nil when a connection wrapper
// stored only the Transport), and, when the Transport alone decides the
// client under the resolver r, the Result of that decision.
//
// It is immutable once stored, but for slot: requests of one connection,
// served on as many goroutines as the protocol allows (HTTP/2), read it
// without locks.
type connInfo struct {
	t     Transport
	trust Trust

	// r and res cache the walk of t under r when it named a client without
	// reading any header: a walk that ends, without error, at the socket
	// peer or at the PROXY source has not read the headers and never will,
	// whatever a request carries, so its Result holds for every request on
	// the connection as long as r is the resolver in force. nil r caches
	// nothing.
	r   *Resolver
	res Result

	// slot holds the resolution of the request whose handlers a middleware
	// runs (HoldRequest).
	slot heldSlot
}

// NewConnContext returns a copy of ctx that carries what one connection tells
// every request on it: the [Trust] to resolve them under and the connection's
// [Transport]. Store it once per connection (net/http's Server.ConnContext;
// the middleware package's ConnContext does so, and reads the Transport of
// a PROXY protocol connection) and resolve each request with [FromRequest],
// which then needs no request copy and no parse of [http.Request].RemoteAddr.
// [Resolver.ResolveRequest] reads the Transport from it too.
//
// When trust's resolver in force names the client from t alone — the
// socket peer is not a trusted proxy, or the PROXY source is the client —
// that Result is computed here, once, and every request on the connection
// resolved under the same resolver gets it without a walk. A change of the
// trust (a [Store] swap) is seen by the next request, which then walks.
//
// A nil trust, or the zero Transport on a connection that is not a
// Unix-domain socket, is the caller's mistake to avoid: with a nil trust
// FromRequest refuses every request with [ErrNoTrust]. A connection whose
// peer has no IP address and was not accepted on a Unix-domain socket should
// be given Transport{PeerUntrusted: true}, which resolves to [ErrNoAddress]
// whatever the trust says.
//
// It allocates once.
func NewConnContext(ctx context.Context, trust Trust, t Transport) context.Context {
	c := &carrier[connInfo]{ctx, transportCtxKey, connInfo{t: t, trust: trust}}
	if trust == nil {
		return c
	}
	if r := trust.Resolver(); r != nil {
		// With no headers, success means the walk ended at the socket peer or
		// the PROXY source: a walk that reaches the header layer and finds
		// no header fails with ErrAllTrusted or ErrTooFewHops. The walk
		// reports its end without building the error Resolve would return
		// (and allocate) for a connection whose headers decide.
		var res Result
		if f, _ := r.walk(&res, &t, nil); f == ReasonNone {
			c.v.r, c.v.res = r, res
		}
	}
	return c
}

// resolve resolves req on the connection under r: the connection's own
// answer when it names the client, the resolution a middleware holds for
// req, or a walk of req's headers.
func (ci *connInfo) resolve(res *Result, r *Resolver, req *http.Request) error {
	switch {
	case r == nil:
		// A Trust that breaks its contract; never a zero Result without error.
		return errNilResolver
	case r == ci.r:
		*res = ci.res
		return nil
	case req.ProtoMajor == 1:
		if err, ok := ci.slot.take(res, r, req); ok {
			return err
		}
	}
	return r.resolve(res, &ci.t, req.Header)
}

// FromRequest returns the client of req, looked up once in its context:
//   - the Result the context-storing middleware put there ([NewContext]),
//     with [ErrMasqueraded] when that Result is flagged as masqueraded;
//   - otherwise req resolved under the Trust its connection carries
//     ([NewConnContext]), with the connection's Transport, loaded once: as
//     [Resolver.ResolveRequest] on the Trust's resolver in force, without
//     parsing req.RemoteAddr;
//   - otherwise an error wrapping [ErrNoTrust]: a request whose connection
//     carries no trust (the server's ConnContext was not set, or set to one
//     that stores only a Transport) is refused, never resolved under a
//     guess of what the server meant to trust.
//
// It is what handlers behind a policy middleware call to read the client:
// each call resolves again, which for a client named by the connection
// costs a lookup and a copy, and otherwise a walk of the header, unless a
// middleware holds req's resolution ([HoldRequest]), which is then
// returned. It never modifies req, does not allocate unless the walk fails,
// and is safe for concurrent use.
func FromRequest(req *http.Request) (Result, error) {
	switch v := req.Context().Value(clientCtxKey).(type) {
	case *connInfo:
		if v.trust == nil {
			return Result{}, errNoTrustTransport
		}
		r := v.resolver()
		if r == v.r && r != nil {
			return v.res, nil // the connection names the client
		}
		var res Result
		err := v.resolve(&res, r, req)
		return res, err
	case *Result:
		if v.Masqueraded {
			return *v, ErrMasqueraded
		}
		return *v, nil
	}
	return Result{}, ErrNoTrust
}

// resolver returns the resolver ci's trust has in force, with the common
// Trusts read without a dynamic call.
func (ci *connInfo) resolver() *Resolver {
	switch t := ci.trust.(type) {
	case *Resolver:
		return t
	case *Store:
		return t.Resolver()
	}
	return ci.trust.Resolver()
}
