package clientip

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestContext(t *testing.T) {
	ctx := context.Background()
	if _, ok := FromContext(ctx); ok {
		t.Error("empty context has a Result")
	}
	if _, ok := TransportFromContext(ctx); ok {
		t.Error("empty context has a Transport")
	}
	res := Result{Client: addr("198.51.100.7"), Source: SourceSocket}
	tr := Transport{Peer: ap("192.0.2.10:1"), Proxy: ap("198.51.100.7:2")}
	ctx = NewTransportContext(NewContext(ctx, res), tr)
	if got, ok := FromContext(ctx); !ok || got != res {
		t.Errorf("FromContext = %v, %v", got, ok)
	}
	if got, ok := TransportFromContext(ctx); !ok || got != tr {
		t.Errorf("TransportFromContext = %v, %v", got, ok)
	}
	if s := fmt.Sprint(resultCtxKey, transportCtxKey); s != "clientip.Result clientip.Transport" {
		t.Errorf("context keys print as %q", s)
	}
	if s := fmt.Sprint(ctx); s != "context.Background.WithValue(clientip.Result).WithValue(clientip.Transport)" {
		t.Errorf("context prints as %q", s)
	}
	// Cancellation propagates through the carriers without a goroutine of their own.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	<-cctx.Done()
	if n := testing.AllocsPerRun(100, func() { FromContext(ctx); TransportFromContext(ctx) }); n != 0 {
		t.Errorf("reading allocates %v", n)
	}
	var sink context.Context
	if n := testing.AllocsPerRun(100, func() { sink = NewContext(context.Background(), res) }); n != 1 || sink == nil {
		t.Errorf("NewContext allocates %v, want 1", n)
	}
}

// TestWithResult pins that WithResult is req.WithContext(NewContext(...)) in
// one allocation: the caller's request is untouched, the copy shares its
// fields, and its context carries the Result on top of the original's values.
func TestWithResult(t *testing.T) {
	type key struct{}
	req := httptest.NewRequest(http.MethodGet, "/path", nil)
	req = req.WithContext(context.WithValue(req.Context(), key{}, "kept"))
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	before := *req
	res := Result{Client: addr("198.51.100.7"), Peer: ap("10.0.0.1:4000"), Source: SourceXForwardedFor, Hop: 1}

	got := WithResult(req, res)
	if got == req {
		t.Fatal("WithResult returned the caller's request")
	}
	if req.Context() != before.Context() || req.URL != before.URL {
		t.Error("WithResult modified the caller's request")
	}
	if _, ok := FromContext(req.Context()); ok {
		t.Error("the caller's request context gained a Result")
	}
	if r, ok := FromContext(got.Context()); !ok || r != res {
		t.Errorf("FromContext(copy) = %v, %v; want %v", r, ok, res)
	}
	if got.Context().Value(key{}) != "kept" {
		t.Error("the copy's context lost the original's values")
	}
	if got.Method != req.Method || got.URL != req.URL || got.RemoteAddr != req.RemoteAddr || got.Header.Get("X-Forwarded-For") != "198.51.100.7" {
		t.Error("the copy does not share the request's fields")
	}
	var sink *http.Request
	if n := testing.AllocsPerRun(100, func() { sink = WithResult(req, res) }); n != 1 || sink == nil {
		t.Errorf("WithResult allocates %v times, want 1", n)
	}
}
