package backend

import (
	"testing"

	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
	"github.com/sourceip/sourceip/trafficpolicy"
)

func lbCase(p trafficpolicy.ExternalTrafficPolicy, k trafficpolicy.LBKind) trafficpolicy.Case {
	return trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathLoadBalancer, LB: k, LocalEndpoint: true}
}

func TestSetupFor(t *testing.T) {
	n := topo.Network()
	s, err := SetupFor(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalCluster, trafficpolicy.LBProxyProtocol)), n)
	if err != nil {
		t.Fatal(err)
	}
	if !s.ProxyHeader || !s.Resolver.TrustedProxies.Contains(topo.NodeAddr(2).V4) || !s.Resolver.TrustedProxies.Contains(topo.PodGateway(1).V6) || s.Resolver.TrustedProxies.Contains(topo.LBInternal.V4) {
		t.Errorf("Cluster + PROXY: %+v, want PROXY headers from the nodes", s)
	}
	s, err = SetupFor(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBFullProxy)), n)
	if err != nil {
		t.Fatal(err)
	}
	if s.ProxyHeader || s.Resolver.TrustedProxies.Len() != 0 || !s.Resolver.Masquerade.Contains(topo.LBInternal.V4) {
		t.Errorf("Local + full proxy: %+v, want nothing trusted and the load balancer flagged", s)
	}
}
