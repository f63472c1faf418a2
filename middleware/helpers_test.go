package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

// The test deployment: proxies in 10.0.0.0/8 append X-Forwarded-For, and
// nodes in 192.168.0.0/16 masquerade clients.
func testResolver(tb testing.TB) *clientip.Resolver {
	tb.Helper()
	r, err := clientip.New(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8, fd00::/8"),
		Header:         "X-Forwarded-For",
		Masquerade:     clientip.MustParsePrefixSet("192.168.0.0/16"),
	})
	require.NoError(tb, err)
	return r
}

func addr(s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	return netip.MustParseAddr(s)
}

func request(remote string, xff ...string) *http.Request {
	r := httptest.NewRequest("GET", "http://example/", nil)
	r.RemoteAddr = remote
	if xff != nil {
		r.Header["X-Forwarded-For"] = xff
	}
	return r
}

// observation is one call to a recordingObserver.
type observation struct {
	kind   string // "resolve" or "deny"
	res    clientip.Result
	err    error
	inCtx  bool // the context carried a Result
	ctxRes clientip.Result
}

type recordingObserver struct {
	mu  sync.Mutex
	obs []observation
}

func (o *recordingObserver) record(kind string, ctx context.Context, res clientip.Result, err error) {
	ctxRes, ok := clientip.FromContext(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs = append(o.obs, observation{kind: kind, res: res, err: err, inCtx: ok, ctxRes: ctxRes})
}

func (o *recordingObserver) ObserveResolve(ctx context.Context, res clientip.Result, err error) {
	o.record("resolve", ctx, res, err)
}

func (o *recordingObserver) ObserveDeny(ctx context.Context, res clientip.Result, err error) {
	o.record("deny", ctx, res, err)
}

func (o *recordingObserver) take() []observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.obs
	o.obs = nil
	return out
}

// echo is a handler that writes the client it finds in the context, or 500.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	res, ok := clientip.FromContext(r.Context())
	if !ok {
		http.Error(w, "no result", http.StatusInternalServerError)
		return
	}
	w.Write([]byte(res.Client.String()))
})

type nopObserver struct{}

func (nopObserver) ObserveResolve(context.Context, clientip.Result, error) {}
func (nopObserver) ObserveDeny(context.Context, clientip.Result, error)    {}

// discard is a ResponseWriter that keeps nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

func clientipFromContext(r *http.Request) (clientip.Result, bool) {
	return clientip.FromContext(r.Context())
}
