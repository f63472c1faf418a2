package clientip

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdTrust is the deployment of the hold tests: proxies in 10.0.0.0/8
// append X-Forwarded-For.
func holdTrust() *Resolver {
	return MustNew(Config{TrustedProxies: private10, Header: "X-Forwarded-For"})
}

// A held resolution is what FromRequest and ResolveRequest return for that
// very request, under the same resolver, until it is released.
func TestHoldRequest(t *testing.T) {
	r := holdTrust()
	ctx := NewConnContext(context.Background(), r, Transport{Peer: ap("10.0.0.1:1")})
	req := connRequest(ctx, http.Header{"X-Forwarded-For": {"198.51.100.7"}})

	h := HoldRequest(req, nil)
	require.NoError(t, h.Err)
	assert.Equal(t, addr("198.51.100.7"), h.Result.Client)

	// The headers change while the handlers run: the held answer stands,
	// for the request the middleware judged.
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	res, err := FromRequest(req)
	require.NoError(t, err)
	assert.Equal(t, addr("198.51.100.7"), res.Client, "FromRequest while held")
	res, err = r.ResolveRequest(req)
	require.NoError(t, err)
	assert.Equal(t, addr("198.51.100.7"), res.Client, "ResolveRequest while held")

	// A copy of the request is another request.
	res, _ = FromRequest(req.WithContext(req.Context()))
	assert.Equal(t, addr("203.0.113.9"), res.Client, "a shallow copy is resolved on its own")

	// A nested hold of the same request returns the held answer and
	// releases nothing.
	inner := HoldRequest(req, nil)
	assert.Equal(t, addr("198.51.100.7"), inner.Result.Client, "nested hold")
	inner.Release()
	res, _ = FromRequest(req)
	assert.Equal(t, addr("198.51.100.7"), res.Client, "the inner Release released the outer hold")

	h.Release()
	h.Release() // twice is harmless
	res, _ = FromRequest(req)
	assert.Equal(t, addr("203.0.113.9"), res.Client, "after Release the request is resolved again")
}

// What is held belongs to one resolver: a resolution under another trust,
// or after a Store swap, walks under its own.
func TestHoldRequestOtherResolver(t *testing.T) {
	store, err := NewStore(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/24"), Header: "X-Forwarded-For"}, StoreOptions{})
	require.NoError(t, err)
	ctx := NewConnContext(context.Background(), store, Transport{Peer: ap("10.0.0.1:1")})
	req := connRequest(ctx, http.Header{"X-Forwarded-For": {"198.51.100.7, 10.0.1.5"}})

	h := HoldRequest(req, nil)
	defer h.Release()
	assert.Equal(t, addr("10.0.1.5"), h.Result.Client)

	// A policy with a trust of its own holds nothing FromRequest reads.
	wider := MustNew(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/16"), Header: "X-Forwarded-For"})
	res, _ := wider.ResolveRequest(req)
	assert.Equal(t, addr("198.51.100.7"), res.Client, "another resolver walks")

	_, err = store.Swap(Config{TrustedProxies: MustParsePrefixSet("10.0.0.0/16"), Header: "X-Forwarded-For"})
	require.NoError(t, err)
	res, _ = FromRequest(req)
	assert.Equal(t, addr("198.51.100.7"), res.Client, "after a swap the request walks under the new resolver")
}

// Only HTTP/1 requests on a prepared connection are held; everything else is
// resolved, with nothing to release.
func TestHoldRequestNotHeld(t *testing.T) {
	r := holdTrust()
	h := http.Header{"X-Forwarded-For": {"198.51.100.7"}}
	viaProxy := NewConnContext(context.Background(), r, Transport{Peer: ap("10.0.0.1:1")})
	tests := []struct {
		name  string
		req   func() *http.Request
		trust Trust
		want  string
		err   error
	}{
		{name: "HTTP/2: streams run at once", req: func() *http.Request {
			req := connRequest(viaProxy, h.Clone())
			req.ProtoMajor = 2
			return req
		}, want: "198.51.100.7"},
		{name: "a client the connection names", req: func() *http.Request {
			return connRequest(NewConnContext(context.Background(), r, Transport{Peer: ap("203.0.113.9:1")}), h.Clone())
		}, want: "203.0.113.9"},
		{name: "no connection node, own trust: RemoteAddr", req: func() *http.Request {
			req := connRequest(context.Background(), h.Clone())
			req.RemoteAddr = "10.0.0.1:1"
			return req
		}, trust: r, want: "198.51.100.7"},
		{name: "no trust anywhere", req: func() *http.Request { return connRequest(context.Background(), h.Clone()) }, err: ErrNoTrust},
		{name: "a transport without trust", req: func() *http.Request {
			return connRequest(NewTransportContext(context.Background(), Transport{Peer: ap("10.0.0.1:1")}), h.Clone())
		}, err: ErrNoTrust},
		{name: "a stored Result", req: func() *http.Request {
			return connRequest(NewContext(viaProxy, Result{Client: addr("192.0.2.1")}), h.Clone())
		}, want: "192.0.2.1"},
		{name: "a trust without a resolver", req: func() *http.Request {
			return connRequest(NewConnContext(context.Background(), nilTrust{}, Transport{Peer: ap("10.0.0.1:1")}), h.Clone())
		}, err: ErrNoTrust},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req()
			held := HoldRequest(req, tc.trust)
			defer held.Release()
			require.ErrorIs(t, held.Err, tc.err)
			assert.Nil(t, held.slot, "held")
			if tc.want != "" {
				assert.Equal(t, addr(tc.want), held.Result.Client)
			}
		})
	}
}

// Many requests on one connection at once — HTTP/1 handlers that went on in
// goroutines, or a pipelining client — each see their own client, never
// another request's held one. Run with -race.
func TestHoldRequestConcurrent(t *testing.T) {
	r := holdTrust()
	ctx := NewConnContext(context.Background(), r, Transport{Peer: ap("10.0.0.1:1")})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				want := fmt.Sprintf("198.51.100.%d", (g*200+i)%250+1)
				req := connRequest(ctx, http.Header{"X-Forwarded-For": {want}})
				h := HoldRequest(req, nil)
				for range 3 {
					res, err := FromRequest(req)
					if err != nil || res.Client != addr(want) {
						t.Errorf("request for %s resolved to %v, %v", want, res.Client, err)
					}
				}
				h.Release()
			}
		})
	}
	wg.Wait()
}

// A goroutine a handler leaves behind goes on reading its request while the
// connection serves the next ones: it gets its own client, from the hold
// while it lasts and from a walk after the release, never the resolution
// the next requests hold in the same slot, and it reads the slot's fields
// only in turn with the holds that write them. Run with -race.
func TestHoldRequestLeftBehind(t *testing.T) {
	r := holdTrust()
	ctx := NewConnContext(context.Background(), r, Transport{Peer: ap("10.0.0.1:1")})
	first := connRequest(ctx, http.Header{"X-Forwarded-For": {"198.51.100.1"}})
	h := HoldRequest(first, nil)
	require.NotNil(t, h.slot, "held")
	var wg sync.WaitGroup
	reading := make(chan struct{})
	wg.Go(func() {
		for i := range 2000 {
			if i == 1 {
				close(reading)
			}
			res, err := FromRequest(first)
			if err != nil || res.Client != addr("198.51.100.1") {
				t.Errorf("the request left behind resolved to %v, %v", res.Client, err)
				return
			}
		}
	})
	<-reading
	h.Release()
	for i := range 500 {
		want := fmt.Sprintf("203.0.113.%d", i%250+1)
		req := connRequest(ctx, http.Header{"X-Forwarded-For": {want}})
		next := HoldRequest(req, nil)
		res, err := FromRequest(req)
		next.Release()
		require.NoError(t, err)
		require.Equal(t, addr(want), res.Client, "request %d", i)
	}
	wg.Wait()
}

func TestHoldRequestNoAllocs(t *testing.T) {
	r := holdTrust()
	req := connRequest(NewConnContext(context.Background(), r, Transport{Peer: ap("[fd00::1]:1")}),
		http.Header{"X-Forwarded-For": {"2001:db8::7, fd00::2"}})
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		h := HoldRequest(req, nil)
		FromRequest(req)
		h.Release()
	}))
}
