package trafficpolicy

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func ep(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// TestRegistryLocalReady pins EndpointsMap.LocalReadyEndpoints
// (pkg/proxy/endpoints.go): distinct IPs of local endpoints that are ready;
// terminating endpoints do not count.
func TestRegistryLocalReady(t *testing.T) {
	tests := []struct {
		name string
		ops  func(r *Registry)
		want int
	}{
		{"zero value: none", func(r *Registry) {}, 0},
		{"one ready endpoint", func(r *Registry) { r.Set(ep("10.244.1.5:8883"), EndpointReady) }, 1},
		{"two ports of one pod count once", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
			r.Set(ep("10.244.1.5:1883"), EndpointReady)
		}, 1},
		{"two pods", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
			r.Set(ep("10.244.1.6:8883"), EndpointReady)
		}, 2},
		{"terminating does not count", func(r *Registry) { r.Set(ep("10.244.1.5:8883"), EndpointTerminating) }, 0},
		{"not ready does not count", func(r *Registry) { r.Set(ep("10.244.1.5:8883"), EndpointNotReady) }, 0},
		{"ready then terminating", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
			r.Set(ep("10.244.1.5:8883"), EndpointTerminating)
		}, 0},
		{"one port of a pod terminating, the other ready", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
			r.Set(ep("10.244.1.5:1883"), EndpointReady)
			r.Set(ep("10.244.1.5:8883"), EndpointTerminating)
		}, 1},
		{"set ready twice counts once", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
		}, 1},
		{"removed", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
			r.Remove(ep("10.244.1.5:8883"))
			r.Remove(ep("10.244.1.9:8883"))
		}, 0},
		{"IPv4-mapped is the same address", func(r *Registry) {
			r.Set(ep("10.244.1.5:8883"), EndpointReady)
			r.Set(ep("[::ffff:10.244.1.5]:1883"), EndpointReady)
		}, 1},
		{"IPv6", func(r *Registry) { r.Set(ep("[fd00::5]:8883"), EndpointReady) }, 1},
		// An invalid address (the zero AddrPort that netip.ParseAddrPort
		// returns with its error) names no pod: counted, it made the node
		// answer 200 with no endpoint behind it.
		{"an invalid address is no endpoint", func(r *Registry) { r.Set(netip.AddrPort{}, EndpointReady) }, 0},
		{"the unspecified address is one (a gateway's own listener)", func(r *Registry) { r.Set(ep("[::]:1883"), EndpointReady) }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Registry
			tt.ops(&r)
			require.Equal(t, tt.want, r.LocalReady(), "LocalReady")
		})
	}
}

func TestRegistryState(t *testing.T) {
	var r Registry
	_, ok := r.State(ep("10.0.0.1:80"))
	require.False(t, ok, "zero Registry holds something")
	require.Zero(t, r.Len(), "zero Registry holds something")
	r.Set(ep("[::ffff:10.0.0.1]:80"), EndpointTerminating)
	s, ok := r.State(ep("10.0.0.1:80"))
	require.True(t, ok)
	require.Equal(t, EndpointTerminating, s)
	require.Equal(t, 1, r.Len())
}

func TestRegistryNoAllocs(t *testing.T) {
	var r Registry
	r.Set(ep("10.244.1.5:8883"), EndpointReady)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = r.LocalReady() }), "LocalReady allocates")
}

func TestRegistryConcurrent(t *testing.T) {
	var r Registry
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				e := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(g), byte(i)}), 80)
				r.Set(e, EndpointReady)
				_ = r.LocalReady()
				r.Set(e, EndpointTerminating)
				r.Remove(e)
			}
		})
	}
	wg.Wait()
	require.Zero(t, r.LocalReady(), "after balanced updates")
	require.Zero(t, r.Len(), "after balanced updates")
}
