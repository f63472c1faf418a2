package trafficpolicy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServiceCases(t *testing.T) {
	s := Service{
		Namespace: "iot", Name: "mqtt-gw", Type: TypeLoadBalancer, ExternalTrafficPolicy: ExternalLocal,
		TrafficDistribution: PreferSameZone, HealthCheckNodePort: 32123, LB: LBProxyProtocol,
		Ports:   []Port{{Name: "mqtts", Protocol: "TCP", Port: 8883, NodePort: 31883}},
		Ingress: []Ingress{{IP: netip.MustParseAddr("192.0.2.10"), IPMode: IPModeProxy}, {Hostname: "mqtt-gw-123.elb.example.com"}},
	}
	got := s.Cases()
	var paths []Path
	for _, c := range got {
		paths = append(paths, c.Path)
		assert.True(t, c.LocalEndpoint, "case %+v does not carry the Service's fields", c)
		assert.Equal(t, ExternalLocal, c.External, "case %+v does not carry the Service's fields", c)
		assert.Equal(t, PreferSameZone, c.Distribution, "case %+v does not carry the Service's fields", c)
		assert.Equal(t, LBProxyProtocol, c.LB, "case %+v does not carry the Service's fields", c)
	}
	require.Equal(t, []Path{PathClusterIP, PathNodePort, PathLoadBalancer, PathPodToLoadBalancerIP}, paths)

	// An unknown load balancer spreads the load-balancer rows over every known kind.
	s.LB = LBUnknown
	s.Ingress = nil
	n := 0
	for _, c := range s.Cases() {
		if c.Path == PathLoadBalancer {
			n++
		}
	}
	require.Equal(t, len(knownLBKinds), n, "load-balancer rows for an unknown kind")
	require.Empty(t, (Service{Type: TypeExternalName}).Cases(), "ExternalName Cases")
}
