package clientip

import "context"

// resultKey is the context key for a Result.
type resultKey struct{}

func (*resultKey) String() string { return "clientip.Result" }

var resultCtxKey = &resultKey{}

// resultCtx carries a Result in one allocation: Value hands out a pointer to
// the field, so neither storing nor reading the Result boxes it.
type resultCtx struct {
	context.Context
	res Result
}

func (c *resultCtx) Value(key any) any {
	if key == resultCtxKey {
		return &c.res
	}
	return c.Context.Value(key)
}

func (c *resultCtx) String() string {
	return contextName(c.Context) + ".WithValue(clientip.Result)"
}

func contextName(c context.Context) string {
	if s, ok := c.(interface{ String() string }); ok {
		return s.String()
	}
	return "context"
}

// NewContext returns a copy of ctx that carries res. It allocates once.
func NewContext(ctx context.Context, res Result) context.Context {
	return &resultCtx{ctx, res}
}

// FromContext returns the Result stored in ctx by [NewContext], if any. It
// does not allocate.
func FromContext(ctx context.Context) (Result, bool) {
	p, ok := ctx.Value(resultCtxKey).(*Result)
	if !ok {
		return Result{}, false
	}
	return *p, true
}
