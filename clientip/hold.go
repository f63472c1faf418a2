package clientip

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// Held is a request's resolution, as [HoldRequest] returns it: the Result
// and the error, and, when it could be held on the request's connection, the
// means to release it.
type Held struct {
	// Result and Err are the request's resolution, as FromRequest or
	// Resolver.ResolveRequest returns it.
	Result Result
	Err    error

	slot *heldSlot // nil: nothing to release
	req  *http.Request
}

// heldSlot holds the resolution of the one request whose handlers a
// middleware is running on an HTTP/1 connection, which serves one request
// at a time. holder is read without the lock, so that a resolution for
// another request (or none held) costs one atomic load, and a release is
// one compare-and-swap of it; the other fields are written by a hold and
// read by a resolution of the holder, both under mu, with holder checked
// there. They outlive a release until the next hold (one request's
// resolution per connection).
type heldSlot struct {
	holder atomic.Pointer[http.Request]

	mu  sync.Mutex
	r   *Resolver
	res Result
	err error
}

// HoldRequest resolves req as [FromRequest] does (under trust's resolver
// when trust is not nil, as [Resolver.ResolveRequest] does) and, until
// [Held.Release], holds the answer on req's connection: every resolution of
// that same *http.Request under the same resolver — FromRequest in a
// handler, ResolveRequest in a limiter — returns it without walking the
// chain again. It is for middleware that resolves a request and then runs
// the handlers that will resolve it again (a policy, a rate limiter):
//
//	h := clientip.HoldRequest(r, nil)
//	defer h.Release()
//	if !allowed(h.Result, h.Err) { ...; return }
//	next.ServeHTTP(w, r)
//
// While held, a resolution of req is the one the middleware judged, even if
// req's headers are changed in the meantime; a shallow copy of req (a
// WithContext) is another request and resolves on its own, as does any
// request once released. A resolution is held only on an HTTP/1 connection
// whose context [NewConnContext] prepared, where requests are served one at
// a time, and only when nothing else is held there (an outer middleware
// holding the same request's resolution is returned as it is, with nothing
// to release); otherwise HoldRequest only resolves. It never allocates beyond
// the resolution's own error, and Release is safe to call on every Held.
func HoldRequest(req *http.Request, trust Trust) Held {
	var h Held
	var ci *connInfo
	if trust == nil {
		switch v := req.Context().Value(clientCtxKey).(type) {
		case *connInfo:
			if v.trust == nil {
				h.Err = errNoTrustTransport
				return h
			}
			ci, trust = v, v.trust
		default:
			h.Result, h.Err = FromRequest(req) // a stored Result, or no trust
			return h
		}
	} else if ci, _ = req.Context().Value(transportCtxKey).(*connInfo); ci == nil {
		h.Result, h.Err = trust.Resolver().ResolveRequest(req)
		return h
	}
	r := trust.Resolver()
	switch {
	case r == nil:
		h.Err = errNilResolver
		return h
	case r == ci.r:
		// Named by the connection: as cheap to answer again as to hold.
		h.Result = ci.res
		return h
	case req.ProtoMajor != 1:
		h.Err = r.resolve(&h.Result, &ci.t, req.Header)
		return h
	}
	if err, ok := ci.slot.take(&h.Result, r, req); ok {
		h.Err = err // held by an outer middleware, which releases it
		return h
	}
	h.Err = r.resolve(&h.Result, &ci.t, req.Header)
	s := &ci.slot
	if s.holder.Load() == nil && s.mu.TryLock() {
		if s.holder.Load() == nil {
			s.r, s.res, s.err = r, h.Result, h.Err
			s.holder.Store(req)
			h.slot, h.req = s, req
		}
		s.mu.Unlock()
	}
	return h
}

// Release ends the hold, if this Held has one: later resolutions of the
// request walk the chain again. Call it when the handlers the middleware
// runs have returned. It is safe to call on any Held, more than once.
func (h Held) Release() {
	if h.slot != nil {
		// The fields stay until the next hold overwrites them under the
		// lock: readers check holder under the lock before they copy.
		h.slot.holder.CompareAndSwap(h.req, nil)
	}
}

// take copies the resolution held for req under r into res, and reports
// whether there was one.
func (s *heldSlot) take(res *Result, r *Resolver, req *http.Request) (error, bool) {
	if s.holder.Load() != req {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder.Load() != req || s.r != r {
		return nil, false
	}
	*res = s.res
	return s.err, true
}
