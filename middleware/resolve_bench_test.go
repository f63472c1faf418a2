package middleware

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchRequests are the requests the benchmarks serve: a direct client with a
// forged header, a client three proxies deep, and a long hostile header.
func benchRequests() []struct {
	name string
	req  *http.Request
} {
	long := strings.Repeat("6.6.6.6, ", 20) + "198.51.100.7, 10.0.0.3, 10.0.0.2"
	return []struct {
		name string
		req  *http.Request
	}{
		{"direct", request("203.0.113.9:5000", "6.6.6.6")},
		{"xff3", request("10.0.0.1:5000", "198.51.100.7, 10.0.0.3, 10.0.0.2")},
		{"xff23", request("10.0.0.1:5000", long)},
	}
}

// BenchmarkResolve compares a bare handler with the same handler behind the
// middleware, which reads the client from the context.
func BenchmarkResolve(b *testing.B) {
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	reads := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := clientipFromContext(r); !ok {
			panic("no result")
		}
	})
	mw, err := New(Config{Trust: testResolver(b)})
	if err != nil {
		b.Fatal(err)
	}
	mwSet, _ := New(Config{Trust: testResolver(b), SetRemoteAddr: true})
	w := httptest.NewRecorder()
	for _, br := range benchRequests() {
		b.Run(br.name+"/bare", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bare.ServeHTTP(w, br.req)
			}
		})
		b.Run(br.name+"/middleware", func(b *testing.B) {
			h := mw(reads)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, br.req)
			}
		})
		b.Run(br.name+"/middleware-setremoteaddr", func(b *testing.B) {
			h := mwSet(reads)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, br.req)
			}
		})
	}
	b.Run("xff3/middleware/parallel", func(b *testing.B) {
		h := mw(reads)
		req := benchRequests()[1].req
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := httptest.NewRecorder()
			for pb.Next() {
				h.ServeHTTP(w, req)
			}
		})
	})
}

// BenchmarkSourceRanges measures the policy behind the middleware.
func BenchmarkSourceRanges(b *testing.B) {
	mw, _ := New(Config{Trust: testResolver(b)})
	p, _ := NewSourceRanges(SourceRangesConfig{Allow: office})
	h := mw(p.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	w := httptest.NewRecorder()
	for _, tc := range []struct {
		name string
		req  *http.Request
	}{
		{"admit", request("10.0.0.1:5000", "198.51.100.7, 10.0.0.2")},
		{"deny", request("10.0.0.1:5000", "203.0.113.9, 10.0.0.2")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, tc.req)
			}
		})
	}
}
