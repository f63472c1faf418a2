package clientip

import (
	"net/http"
	"runtime"
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
// at a time. state is its lock word: nil when nothing is held, the held
// request, or slotBusy while a hold writes the fields or a reader of the
// held request copies them. A hold takes it from nil and publishes the
// request; a reader takes it from the request and gives it back; a release
// takes it from the request to nil. So a resolution for another request
// (or none held) costs one atomic load, a hold two atomic writes, a read of
// the held resolution two and a release one. The fields are only read or
// written by the goroutine that moved state to slotBusy, which orders every
// access to them (go test -race, TestHoldRequestLeftBehind).
type heldSlot struct {
	state atomic.Pointer[http.Request]

	r   *Resolver
	res Result
	err error
}

// slotBusy is the heldSlot state of a hold writing or a reader copying. It
// is a marker, compared and never read.
var slotBusy = new(http.Request)

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
//
// Holding costs two atomic writes, reading the held resolution two more and
// releasing it one, and the goroutines that use one connection take turns
// only to copy a Result. Measured, that is less than walking the chain
// again, even for a single-address header (PERFORMANCE.md).
func HoldRequest(req *http.Request, trust Trust) Held {
	var h Held
	var ci *connInfo
	var r *Resolver
	if trust == nil {
		switch v := req.Context().Value(clientCtxKey).(type) {
		case *connInfo:
			if v.trust == nil {
				h.Err = errNoTrustTransport
				return h
			}
			ci, r = v, v.trust.Resolver()
		default:
			h.Result, h.Err = FromRequest(req) // a stored Result, or no trust
			return h
		}
	} else if r = trust.Resolver(); r == nil {
		h.Err = errNilResolver
		return h
	} else if ci, _ = req.Context().Value(transportCtxKey).(*connInfo); ci == nil {
		h.Result, h.Err = r.ResolveRequest(req)
		return h
	}
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
	if s.state.Load() == nil && s.state.CompareAndSwap(nil, slotBusy) {
		s.r, s.res, s.err = r, h.Result, h.Err
		s.state.Store(req)
		h.slot, h.req = s, req
	}
	return h
}

// Release ends the hold, if this Held has one: later resolutions of the
// request walk the chain again. Call it when the handlers the middleware
// runs have returned. It is safe to call on any Held, more than once.
func (h Held) Release() {
	if h.slot == nil || h.slot.state.CompareAndSwap(h.req, nil) {
		return
	}
	for {
		switch h.slot.state.Load() {
		case h.req:
			if h.slot.state.CompareAndSwap(h.req, nil) {
				return
			}
		case slotBusy:
			// A reader copying the held resolution (or, once released, a
			// hold of another request writing): a copy, then look again.
			runtime.Gosched()
		default:
			return // released already
		}
	}
}

// take copies the resolution held for req under r into res, and reports
// whether there was one.
func (s *heldSlot) take(res *Result, r *Resolver, req *http.Request) (error, bool) {
	for {
		switch s.state.Load() {
		case req:
			if !s.state.CompareAndSwap(req, slotBusy) {
				continue // another reader took it first, or it was released
			}
			ok := s.r == r
			if ok {
				*res = s.res
			}
			err := s.err
			s.state.Store(req)
			return err, ok
		case slotBusy:
			// A hold writing or a reader copying, which may be of req:
			// wait for the copy, then look again.
			runtime.Gosched()
		default:
			return nil, false
		}
	}
}
