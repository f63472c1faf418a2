package trafficpolicy

import (
	"io"
	"testing"
)

func BenchmarkExpect(b *testing.B) {
	c := Case{Type: TypeLoadBalancer, External: ExternalCluster, Path: PathLoadBalancer, LB: LBProxyProtocol, LocalEndpoint: true}
	b.ReportAllocs()
	for b.Loop() {
		_ = Expect(c)
	}
}

func BenchmarkParseService(b *testing.B) {
	data := []byte(gatewayManifest)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseService(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderFullMatrix(b *testing.B) {
	rows := FullMatrix()
	b.ReportAllocs()
	for b.Loop() {
		if err := RenderMatrix(io.Discard, rows); err != nil {
			b.Fatal(err)
		}
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
