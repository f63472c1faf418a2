package clientip

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestContext(t *testing.T) {
	ctx := context.Background()
	_, ok := FromContext(ctx)
	assert.False(t, ok, "empty context has a Result")
	_, ok = TransportFromContext(ctx)
	assert.False(t, ok, "empty context has a Transport")

	res := Result{Client: addr("198.51.100.7"), Source: SourceSocket}
	tr := Transport{Peer: ap("192.0.2.10:1"), Proxy: ap("198.51.100.7:2")}
	ctx = NewTransportContext(NewContext(ctx, res), tr)
	got, ok := FromContext(ctx)
	require.True(t, ok)
	assert.Equal(t, res, got)
	gotT, ok := TransportFromContext(ctx)
	require.True(t, ok)
	assert.Equal(t, tr, gotT)
	assert.Equal(t, "clientip.Result clientip.Transport", fmt.Sprint(resultCtxKey, transportCtxKey))
	assert.Equal(t, "context.Background.WithValue(clientip.Result).WithValue(clientip.Transport)", fmt.Sprint(ctx))

	// Cancellation propagates through the carriers without a goroutine of their own.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	<-cctx.Done()
	assert.Zero(t, testing.AllocsPerRun(100, func() { FromContext(ctx); TransportFromContext(ctx) }), "reading allocates")
	var sink context.Context
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { sink = NewContext(context.Background(), res) }), "NewContext allocations")
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { sink = NewTransportContext(context.Background(), tr) }), "NewTransportContext allocations")
	assert.NotNil(t, sink)
}
