package backend

import (
	"testing"

	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
	"github.com/sourceip/sourceip/trafficpolicy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lbCase(p trafficpolicy.ExternalTrafficPolicy, k trafficpolicy.LBKind) trafficpolicy.Case {
	return trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathLoadBalancer, LB: k, LocalEndpoint: true}
}

func TestSetupFor(t *testing.T) {
	n := topo.Network()
	s, err := SetupFor(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalCluster, trafficpolicy.LBProxyProtocol)), n)
	require.NoError(t, err)
	assert.True(t, s.ProxyHeader, "Cluster + PROXY: the pod reads PROXY headers")
	assert.True(t, s.Resolver.TrustedProxies.Contains(topo.NodeAddr(2).V4), "Cluster + PROXY: resolver %+v, want the nodes", s.Resolver)
	assert.True(t, s.Resolver.TrustedProxies.Contains(topo.PodGateway(1).V6), "Cluster + PROXY: resolver %+v, want the nodes", s.Resolver)
	assert.False(t, s.Resolver.TrustedProxies.Contains(topo.LBInternal.V4), "Cluster + PROXY: resolver %+v, want the nodes", s.Resolver)
	s, err = SetupFor(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBFullProxy)), n)
	require.NoError(t, err)
	assert.False(t, s.ProxyHeader, "Local + full proxy: no PROXY header")
	assert.Zero(t, s.Resolver.TrustedProxies.Len(), "Local + full proxy: nothing trusted")
	assert.True(t, s.Resolver.Masquerade.Contains(topo.LBInternal.V4), "Local + full proxy: the load balancer flagged: %+v", s)
}
