package clientip

import (
	"context"
	"fmt"
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
