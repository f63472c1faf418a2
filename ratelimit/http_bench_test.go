package ratelimit

import (
	"net/http"
	"testing"
)

// BenchmarkHTTP: a request through the middleware to a handler, against
// the handler alone, from a client behind one trusted proxy (X-Forwarded-For
// of three hops), with a Limiter whose limit the load stays under.
func BenchmarkHTTP(b *testing.B) {
	r := request("10.0.0.1:4000", "203.0.113.7, 10.0.0.3, 10.0.0.2")
	w := &headerWriter{h: http.Header{}}
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"handler", okHandler},
		{"limited", newHTTP(b, HTTPConfig{Store: mustNew(b, 1e9, 100, 0)})},
		{"limited/quiet", newHTTP(b, HTTPConfig{Store: mustNew(b, 1e9, 100, 0), QuietWhenAllowed: true})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.h.ServeHTTP(w, r)
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &headerWriter{h: http.Header{}}
				for pb.Next() {
					bc.h.ServeHTTP(w, r)
				}
			})
		})
	}
}
