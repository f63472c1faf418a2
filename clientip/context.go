package clientip

import "context"

// ctxKey is the type of this package's context keys.
type ctxKey struct{ name string }

func (k *ctxKey) String() string { return k.name }

var (
	resultCtxKey    = &ctxKey{"clientip.Result"}
	transportCtxKey = &ctxKey{"clientip.Transport"}

	// clientCtxKey is answered by the carriers of a client, a stored Result
	// and a connection's node, so that one lookup finds the nearest of them
	// (see FromRequest); other carriers (an Origin) pass it on.
	clientCtxKey = &ctxKey{"clientip.client"}
)

// carrier is a context node that carries one value in one allocation: Value
// hands out a pointer to the field, so neither storing nor reading the value
// boxes it.
type carrier[T any] struct {
	context.Context
	key *ctxKey
	v   T
}

func (c *carrier[T]) Value(key any) any {
	if key == c.key || key == clientCtxKey && (c.key == resultCtxKey || c.key == transportCtxKey) {
		return &c.v
	}
	return c.Context.Value(key)
}

func (c *carrier[T]) String() string {
	name := "context"
	if s, ok := c.Context.(interface{ String() string }); ok {
		name = s.String()
	}
	return name + ".WithValue(" + c.key.name + ")"
}

func fromCarrier[T any](ctx context.Context, key *ctxKey) (T, bool) {
	p, ok := ctx.Value(key).(*T)
	if !ok {
		var zero T
		return zero, false
	}
	return *p, true
}

// NewContext returns a copy of ctx that carries res. It allocates once.
func NewContext(ctx context.Context, res Result) context.Context {
	return &carrier[Result]{ctx, resultCtxKey, res}
}

// FromContext returns the Result stored in ctx by [NewContext], if any. It
// does not allocate.
func FromContext(ctx context.Context) (Result, bool) {
	return fromCarrier[Result](ctx, resultCtxKey)
}

// NewTransportContext returns a copy of ctx that carries t, for connection
// wrappers that hand a connection's layers to per-request code (see
// [Resolver.ResolveRequest]). It carries no [Trust]: [FromRequest] refuses
// requests on it with [ErrNoTrust]; [NewConnContext] carries both. It
// allocates once.
func NewTransportContext(ctx context.Context, t Transport) context.Context {
	return &carrier[connInfo]{ctx, transportCtxKey, connInfo{t: t}}
}

// TransportFromContext returns the Transport stored in ctx by
// [NewTransportContext] or [NewConnContext], if any. It does not allocate.
func TransportFromContext(ctx context.Context) (Transport, bool) {
	ci, ok := ctx.Value(transportCtxKey).(*connInfo)
	if !ok {
		return Transport{}, false
	}
	return ci.t, true
}
