package trafficpolicy

import "testing"

func BenchmarkExpect(b *testing.B) {
	c := Case{Type: TypeLoadBalancer, External: ExternalCluster, Path: PathLoadBalancer, LB: LBProxyProtocol, LocalEndpoint: true}
	b.ReportAllocs()
	for b.Loop() {
		_ = Expect(c)
	}
}

func BenchmarkObserveAt(b *testing.B) {
	p, err := NewProber(ProberConfig{Targets: []Target{{Name: "n", URL: "http://n/"}}, Timing: HAProxyTiming()})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			p.ObserveAt("n", i%4 != 0, t0)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				p.ObserveAt("n", i%4 != 0, t0)
			}
		})
	})
}
