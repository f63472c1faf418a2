package explain

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/clientip"
)

// BenchmarkAdvisorObserve observes a request through a proxy with a short
// X-Forwarded-For.
func BenchmarkAdvisorObserve(b *testing.B) {
	a, err := NewAdvisor(AdvisorConfig{Trust: clientip.MustNew(xffConfig)})
	if err != nil {
		b.Fatal(err)
	}
	t := clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:1")}
	h := http.Header{"X-Forwarded-For": {"198.51.100.7, 10.0.0.2"}}
	b.ReportAllocs()
	for b.Loop() {
		a.Observe(t, h)
	}
}

// BenchmarkAdvisorObserveBesideHostile observes short requests while
// another goroutine observes, without pause, requests with an
// X-Forwarded-For of about a megabyte: what a short request pays for
// sharing the Advisor with long ones.
func BenchmarkAdvisorObserveBesideHostile(b *testing.B) {
	r := clientip.MustNew(clientip.Config{TrustedProxies: proxies10, Header: "X-Forwarded-For", MaxHeaderBytes: 1 << 20})
	a, err := NewAdvisor(AdvisorConfig{Trust: r})
	if err != nil {
		b.Fatal(err)
	}
	t := clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:1")}
	short := http.Header{"X-Forwarded-For": {"198.51.100.7, 10.0.0.2"}}
	long := http.Header{"X-Forwarded-For": {strings.Repeat("10.1.1.1,", 110_000) + "198.51.100.7"}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				a.Observe(t, long)
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		a.Observe(t, short)
	}
	close(stop)
	<-done
}
