package proxyproto

import (
	"context"
	"net"

	"github.com/sourceip/sourceip/clientip"
)

// factsKey is the context key for Facts.
type factsKey struct{}

func (*factsKey) String() string { return "proxyproto.Facts" }

var factsCtxKey = &factsKey{}

// ConnContext is an [net/http.Server] ConnContext function: when c came from
// a [Listener] (directly or under TLS), it returns a copy of ctx carrying c's
// [Facts] and, through [clientip.NewTransportContext], its
// [clientip.Transport], so that [clientip.Resolver.ResolveRequest] sees the
// PROXY layer and keeps the load balancer as the socket peer. Otherwise it
// returns ctx unchanged.
//
//	srv := &http.Server{Handler: h, ConnContext: proxyproto.ConnContext}
//
// To combine it with another ConnContext, call one from the other.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	f, ok := FactsFromConn(c)
	if !ok {
		return ctx
	}
	return NewContext(ctx, f)
}

// NewContext returns a copy of ctx carrying f and f.Transport(), as
// ConnContext does.
func NewContext(ctx context.Context, f Facts) context.Context {
	ctx = context.WithValue(ctx, factsCtxKey, f)
	return clientip.NewTransportContext(ctx, f.Transport())
}

// FactsFromContext returns the Facts stored by [ConnContext] or [NewContext].
// It is how an HTTP handler reads what the resolved client does not carry:
// the header's TLVs (the authority, an AWS VPC endpoint, Azure Private Link or
// GCP Private Service Connect id, the TLS facts of [SSL]), its destination and
// its command. It does not allocate.
func FactsFromContext(ctx context.Context) (Facts, bool) {
	f, ok := ctx.Value(factsCtxKey).(Facts)
	return f, ok
}
