package compare

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	chimw "github.com/go-chi/chi/v5/middleware"
	"github.com/stretchr/testify/assert"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// The middleware rows, in the order the benchmark runs them.
var middlewareNames = []string{"sourceip", "sourceip-policy", "sourceip-serve", "chi"}

// middlewares returns, for a scenario chi supports, the request middlewares
// that resolve under the trusted set, each behind a handler that reads the
// client into *got as an application would, and the request each is given:
//   - sourceip: middleware.New, which stores the Result in a copy of the
//     request, the handler reading it with clientip.FromContext;
//   - sourceip-policy: no copy: an allowlist policy (middleware.NewSourceRanges)
//     that resolves on demand, the handler resolving again with
//     clientip.FromRequest, on a request whose connection
//     middleware.ConnContext prepared;
//   - sourceip-serve: the same policy's Serve, which hands the handler the
//     resolution it admitted as an argument;
//   - chi: ClientIPFromXFF, or ClientIPFromHeader for a single-address
//     header, the handler reading chi's context value.
//
// Every request carries the context a real net/http server gives it.
func middlewares(tb testing.TB, s scenario, got *netip.Addr) (map[string]http.Handler, map[string]*http.Request) {
	trust := resolverFor(s)
	resolve, err := middleware.New(middleware.Config{Trust: trust})
	if err != nil {
		tb.Fatal(err)
	}
	policy, err := middleware.NewSourceRanges(middleware.SourceRangesConfig{
		Allow: clientip.MustParsePrefixSet("198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32"),
	})
	if err != nil {
		tb.Fatal(err)
	}
	chiMW := chimw.ClientIPFromXFF(trusted...)
	if s.header != "X-Forwarded-For" {
		chiMW = chimw.ClientIPFromHeader(s.header, trusted...)
	}
	plain := s.request().WithContext(serverContext(tb, nil, s.remote))
	return map[string]http.Handler{
			"sourceip": resolve(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				res, _ := clientip.FromContext(r.Context())
				*got = res.Client
			})),
			"sourceip-policy": policy.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				res, _ := clientip.FromRequest(r)
				*got = res.Client
			})),
			"sourceip-serve": policy.Serve(func(_ http.ResponseWriter, _ *http.Request, res clientip.Result, _ error) {
				*got = res.Client
			}),
			"chi": chiMW(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				*got = chimw.GetClientIPAddr(r.Context())
			})),
		}, map[string]*http.Request{
			"sourceip":        plain,
			"sourceip-policy": s.connRequest(tb, trust),
			"sourceip-serve":  s.connRequest(tb, trust),
			"chi":             plain,
		}
}

// middlewareScenarios are the scenarios chi's middlewares support.
func middlewareScenarios() []scenario {
	var out []scenario
	for _, s := range scenarios() {
		if s.header == "X-Forwarded-For" || s.header == "X-Real-IP" {
			out = append(out, s)
		}
	}
	return out
}

// TestSameMiddlewareAnswers pins that every middleware hands the same client
// to the handler for every scenario, so the benchmark compares equal work.
func TestSameMiddlewareAnswers(t *testing.T) {
	var got netip.Addr
	for _, s := range middlewareScenarios() {
		hs, reqs := middlewares(t, s, &got)
		for _, name := range middlewareNames {
			got = netip.Addr{}
			w := httptest.NewRecorder()
			hs[name].ServeHTTP(w, reqs[name])
			assert.Equal(t, s.want, got.String(), "%s/%s", s.name, name)
			assert.Equal(t, http.StatusOK, w.Code, "%s/%s", s.name, name)
		}
	}
}

// TestPolicyMiddlewareNoAllocs pins the no-copy rows' promise: the policy and
// the handler's reading of the client allocate nothing.
func TestPolicyMiddlewareNoAllocs(t *testing.T) {
	var got netip.Addr
	w := httptest.NewRecorder()
	for _, s := range middlewareScenarios() {
		hs, reqs := middlewares(t, s, &got)
		for _, name := range []string{"sourceip-policy", "sourceip-serve"} {
			h, req := hs[name], reqs[name]
			assert.Zero(t, testing.AllocsPerRun(100, func() { h.ServeHTTP(w, req) }), "%s/%s", s.name, name)
		}
	}
}

// BenchmarkMiddleware runs every scenario chi supports through sourceip's
// middlewares and chi's, each followed by a handler that reads the client,
// each checked first to hand the handler the scenario's client (as
// TestSameMiddlewareAnswers does).
func BenchmarkMiddleware(b *testing.B) {
	var got netip.Addr
	w := httptest.NewRecorder()
	for _, s := range middlewareScenarios() {
		hs, reqs := middlewares(b, s, &got)
		for _, name := range middlewareNames {
			h, req := hs[name], reqs[name]
			got = netip.Addr{}
			if h.ServeHTTP(w, req); got.String() != s.want {
				b.Fatalf("%s/%s: the handler got %v, want %s", s.name, name, got, s.want)
			}
			b.Run(s.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					h.ServeHTTP(w, req)
				}
			})
		}
	}
}

// floorKey is the context key of BenchmarkMiddlewareFloor.
type floorKey struct{}

// floorNode is the smallest context node that carries a value: a pointer.
type floorNode struct {
	context.Context
	v *netip.Addr
}

func (n *floorNode) Value(key any) any {
	if key == (floorKey{}) {
		return n.v
	}
	return n.Context.Value(key)
}

// BenchmarkMiddlewareFloor is the least any middleware can do that hands a
// value to the next handler through the request context without modifying the
// caller's request, as net/http asks of handlers and the middleware contract
// requires: a copy of the request, the only way to give a request a new
// context, and a context node holding one pointer. It resolves nothing. Its
// time bounds how much faster than chi's ClientIPFromXFF any such middleware
// can be, whatever its resolver costs.
//
// To make the bound as low as it can be, the copy and the node share one
// allocation. sourceip's middleware does not do that: a context that a handler
// keeps (context.WithoutCancel for background work, say) would then keep the
// whole request copy, body included, reachable
// (middleware.TestContextDoesNotRetainRequest).
func BenchmarkMiddlewareFloor(b *testing.B) {
	value := new(netip.Addr)
	var got *netip.Addr
	h := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, withFloorValue(r, value))
		})
	}(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got, _ = r.Context().Value(floorKey{}).(*netip.Addr)
	}))
	w := httptest.NewRecorder()
	req := middlewareScenarios()[0].request()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
	if got != value {
		b.Fatal("the handler did not see the value")
	}
}

// floorRequest is a request copy and its context node, allocated together.
type floorRequest struct {
	req  http.Request
	node floorNode
}

// withFloorValue returns a shallow copy of r whose context carries v, in one
// allocation.
func withFloorValue(r *http.Request, v *netip.Addr) *http.Request {
	p := new(floorRequest)
	p.node = floorNode{r.Context(), v}
	p.req = *r.WithContext(&p.node)
	return &p.req
}
