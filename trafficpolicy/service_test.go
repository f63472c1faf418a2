package trafficpolicy

import (
	"net/netip"
	"slices"
	"testing"
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
		if !c.LocalEndpoint || c.External != ExternalLocal || c.Distribution != PreferSameZone || c.LB != LBProxyProtocol {
			t.Errorf("case %+v does not carry the Service's fields", c)
		}
	}
	if want := []Path{PathClusterIP, PathNodePort, PathLoadBalancer, PathPodToLoadBalancerIP}; !slices.Equal(paths, want) {
		t.Fatalf("paths %v, want %v", paths, want)
	}

	// An unknown load balancer spreads the load-balancer rows over every known kind.
	s.LB = LBUnknown
	s.Ingress = nil
	n := 0
	for _, c := range s.Cases() {
		if c.Path == PathLoadBalancer {
			n++
		}
	}
	if n != len(knownLBKinds) {
		t.Fatalf("%d load-balancer rows for an unknown kind, want %d", n, len(knownLBKinds))
	}
	if got := (Service{Type: TypeExternalName}).Cases(); len(got) != 0 {
		t.Fatalf("ExternalName Cases = %v, want none", got)
	}
}
