package topo

import (
	"net/netip"
	"testing"

	"github.com/sourceip/sourceip/examples/policylab/internal/kubeproxy"
	"github.com/sourceip/sourceip/trafficpolicy"
	"github.com/sourceip/sourceip/trafficpolicy/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Service manifests say what the lab's addresses and ports say, both as
// trafficpolicy reads them and as kube-proxy gets them.
func TestServiceManifests(t *testing.T) {
	for _, p := range []trafficpolicy.ExternalTrafficPolicy{trafficpolicy.ExternalCluster, trafficpolicy.ExternalLocal} {
		data := ServiceManifest(p)
		model, err := manifest.Parse(data)
		require.NoError(t, err)
		assert.Equal(t, p, model.ExternalTrafficPolicy)
		assert.Equal(t, trafficpolicy.TypeLoadBalancer, model.Type)
		assert.Equal(t, []trafficpolicy.IPMode{trafficpolicy.IPModeVIP}, model.IPModes())
		assert.Equal(t, []trafficpolicy.Port{{Name: "http", Protocol: "TCP", Port: ServicePort, NodePort: NodePort}}, model.Ports)
		want := uint16(0)
		if p == trafficpolicy.ExternalLocal {
			want = HealthCheckNodePort
		}
		assert.Equal(t, want, model.HealthCheckNodePort)

		svc, err := kubeproxy.DecodeService(data)
		require.NoError(t, err)
		assert.Equal(t, []string{ClusterIP.V4.String(), ClusterIP.V6.String()}, svc.Spec.ClusterIPs)
		assert.EqualValues(t, TargetPort, svc.Spec.Ports[0].TargetPort.IntValue())
		var ingress []netip.Addr
		for _, in := range svc.Status.LoadBalancer.Ingress {
			ingress = append(ingress, netip.MustParseAddr(in.IP))
		}
		assert.ElementsMatch(t, []netip.Addr{VIPPassthrough.V4, VIPPassthrough.V6, VIPHAProxy.V4, VIPHAProxy.V6, VIPHAProxyPP.V4, VIPHAProxyPP.V6}, ingress)
	}
}
