package compare

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	chimw "github.com/go-chi/chi/v5/middleware"
	"github.com/stretchr/testify/assert"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// middlewares returns the two request middlewares that resolve from
// X-Forwarded-For under a trusted set, sourceip's and chi's ClientIPFromXFF,
// each behind a handler that reads the client from the request context into
// *got, as an application would.
func middlewares(tb testing.TB, got *netip.Addr) map[string]http.Handler {
	resolve, err := middleware.New(middleware.Config{
		Trust: clientip.MustNew(clientip.Config{
			TrustedProxies: clientip.MustParsePrefixSet(strings.Join(trusted, ",")),
			Header:         "X-Forwarded-For",
		}),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return map[string]http.Handler{
		"sourceip": resolve(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			res, _ := clientip.FromContext(r.Context())
			*got = res.Client
		})),
		"chi": chimw.ClientIPFromXFF(trusted...)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			*got = chimw.GetClientIPAddr(r.Context())
		})),
	}
}

// xffScenarios are the scenarios both middlewares support.
func xffScenarios() []scenario {
	var out []scenario
	for _, s := range scenarios() {
		if s.header == "X-Forwarded-For" {
			out = append(out, s)
		}
	}
	return out
}

// TestSameMiddlewareAnswers pins that both middlewares hand the same client
// to the handler for every scenario, so the benchmark compares equal work.
func TestSameMiddlewareAnswers(t *testing.T) {
	var got netip.Addr
	for name, h := range middlewares(t, &got) {
		for _, s := range xffScenarios() {
			got = netip.Addr{}
			h.ServeHTTP(httptest.NewRecorder(), s.request())
			assert.Equal(t, s.want, got.String(), "%s/%s", s.name, name)
		}
	}
}

// BenchmarkMiddleware runs every X-Forwarded-For scenario through sourceip's
// middleware and chi's ClientIPFromXFF, each followed by a handler that reads
// the client from the context.
func BenchmarkMiddleware(b *testing.B) {
	var got netip.Addr
	hs := middlewares(b, &got)
	w := httptest.NewRecorder()
	for _, s := range xffScenarios() {
		for _, name := range []string{"sourceip", "chi"} {
			h, req := hs[name], s.request()
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
	req := xffScenarios()[0].request()
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
