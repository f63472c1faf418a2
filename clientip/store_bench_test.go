package clientip

import (
	"net/http"
	"net/netip"
	"testing"
	"time"
)

// storeBenchCases are the scenarios of BenchmarkStore: BenchmarkResolve's
// "direct" (the cheapest walk, where the store's share is largest) and
// "xff3".
func storeBenchCases() []struct {
	name string
	cfg  Config
	t    Transport
	h    http.Header
	want netip.Addr
} {
	var out []struct {
		name string
		cfg  Config
		t    Transport
		h    http.Header
		want netip.Addr
	}
	for _, c := range benchCases() {
		if c.name == "direct" || c.name == "xff3" {
			out = append(out, c)
		}
	}
	return out
}

// storeBenchSetup returns a static resolver for cfg, a Store holding cfg,
// and the Store as a Trust.
func storeBenchSetup(b *testing.B, cfg Config) (*Resolver, *Store, Trust) {
	s, err := NewStore(cfg, StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return MustNew(cfg), s, s
}

// BenchmarkStore compares the read path through a Store with a static
// resolver: r.Resolve, store.Resolver().Resolve, and the same through the
// Trust interface, as the middleware and the listeners call it. Compare
// them with benchstat on runs interleaved A/B, for example ten runs of
// -count=1:
//
//	go test -c -o store.test ./clientip
//	for i in $(seq 10); do ./store.test -test.run '^$' -test.bench '^BenchmarkStore$' -test.count 1; done > store.txt
//	benchstat -col /path store.txt
func BenchmarkStore(b *testing.B) {
	for _, c := range storeBenchCases() {
		r, s, trust := storeBenchSetup(b, c.cfg)
		if res, err := trust.Resolver().Resolve(c.t, c.h); err != nil || res.Client != c.want {
			b.Fatalf("%s: got %v, %v; want %v", c.name, res, err, c.want)
		}
		b.Run(c.name+"/path=static", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Resolve(c.t, c.h)
			}
		})
		b.Run(c.name+"/path=store", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Resolver().Resolve(c.t, c.h)
			}
		})
		b.Run(c.name+"/path=trust", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				trust.Resolver().Resolve(c.t, c.h)
			}
		})
	}
}

// BenchmarkStoreParallel is BenchmarkStore's read path on every P, with and
// without a goroutine that swaps the store's configuration every 100 µs
// (far more often than any deployment would), to show what a swap costs the
// readers: each one invalidates the cache line they all read.
func BenchmarkStoreParallel(b *testing.B) {
	for _, c := range storeBenchCases() {
		r, s, trust := storeBenchSetup(b, c.cfg)
		b.Run(c.name+"/path=static", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r.Resolve(c.t, c.h)
				}
			})
		})
		b.Run(c.name+"/path=trust", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					trust.Resolver().Resolve(c.t, c.h)
				}
			})
		})
		b.Run(c.name+"/path=trust-swapping", func(b *testing.B) {
			// Two configurations that resolve alike, so every answer is
			// the same while the pointer changes under the readers.
			alt := c.cfg
			alt.MaxHops = DefaultMaxHops - 1
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				tick := time.NewTicker(100 * time.Microsecond)
				defer tick.Stop()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					cfg := c.cfg
					if i%2 == 0 {
						cfg = alt
					}
					if _, err := s.Swap(cfg); err != nil {
						b.Error(err)
						return
					}
				}
			}()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					trust.Resolver().Resolve(c.t, c.h)
				}
			})
			close(stop)
			<-done
		})
	}
}
