package clientip

import "context"

// resultKey is the context key for a Result.
type resultKey struct{}

func (*resultKey) String() string { return "clientip.Result" }

var resultCtxKey = &resultKey{}

// NewContext returns a copy of ctx that carries res.
func NewContext(ctx context.Context, res Result) context.Context {
	return context.WithValue(ctx, resultCtxKey, res)
}

// FromContext returns the Result stored in ctx by [NewContext], if any.
func FromContext(ctx context.Context) (Result, bool) {
	res, ok := ctx.Value(resultCtxKey).(Result)
	return res, ok
}
