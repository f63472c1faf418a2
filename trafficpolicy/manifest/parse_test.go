package manifest

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/trafficpolicy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const gatewayManifest = `# the reference gateway, as deployed
apiVersion: apps/v1
kind: Deployment
metadata:
  name: mqtt-gw
spec:
  replicas: 2
--- # the Service in front of it
apiVersion: v1
kind: Service
metadata:
  name: mqtt-gw
  namespace: iot
  annotations:
    service.beta.kubernetes.io/aws-load-balancer-type: nlb
    service.beta.kubernetes.io/aws-load-balancer-proxy-protocol: "*"
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  trafficDistribution: PreferSameZone
  healthCheckNodePort: 32123
  loadBalancerSourceRanges: ["198.51.100.0/24", "2001:db8::1/32"]
  ports:
  - name: mqtts
    port: 8883
    targetPort: 8883
    nodePort: 31883
status:
  loadBalancer:
    ingress:
    - ip: 192.0.2.10
      ipMode: Proxy
    - hostname: mqtt-gw-123.elb.example.com
`

func TestParse(t *testing.T) {
	s, err := Parse([]byte(gatewayManifest))
	require.NoError(t, err)
	require.Equal(t, "iot", s.Namespace)
	require.Equal(t, "mqtt-gw", s.Name)
	require.Equal(t, trafficpolicy.TypeLoadBalancer, s.Type)
	require.Equal(t, trafficpolicy.ExternalLocal, s.ExternalTrafficPolicy)
	require.Equal(t, trafficpolicy.InternalCluster, s.InternalTrafficPolicy)
	require.Equal(t, trafficpolicy.PreferSameZone, s.TrafficDistribution)
	require.Equal(t, uint16(32123), s.HealthCheckNodePort)
	require.False(t, s.Headless)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8::/32")}, s.LoadBalancerSourceRanges, "source ranges (host bits masked)")
	assert.Equal(t, []trafficpolicy.Port{{Name: "mqtts", Protocol: "TCP", Port: 8883, NodePort: 31883}}, s.Ports)
	assert.Equal(t, []trafficpolicy.Ingress{{IP: netip.MustParseAddr("192.0.2.10"), IPMode: trafficpolicy.IPModeProxy}, {Hostname: "mqtt-gw-123.elb.example.com"}}, s.Ingress)
	assert.Equal(t, trafficpolicy.LBPassthroughProxyProtocol, s.LB, "an NLB (instance targets, client IP preserved) with proxy protocol")
	assert.Equal(t, "service.beta.kubernetes.io/aws-load-balancer-proxy-protocol", s.LBHint, "the PROXY annotation names the kind")
	assert.True(t, s.NeedsHealthCheck(), "NeedsHealthCheck for LoadBalancer + Local")
	assert.Equal(t, []trafficpolicy.IPMode{trafficpolicy.IPModeProxy}, s.IPModes(), "a hostname-only ingress is not captured either")
}

func TestParseDefaults(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		want     trafficpolicy.Service
	}{
		{"no type is ClusterIP; policies default to Cluster",
			"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports: [{port: 80}]\n",
			trafficpolicy.Service{Name: "a", Ports: []trafficpolicy.Port{{Protocol: "TCP", Port: 80}}}},
		{"LoadBalancer without externalTrafficPolicy is Cluster",
			"apiVersion: v1\nkind: Service\nmetadata: {name: b}\nspec: {type: LoadBalancer}\n",
			trafficpolicy.Service{Name: "b", Type: trafficpolicy.TypeLoadBalancer}},
		{"JSON, internalTrafficPolicy Local, headless",
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"c"},"spec":{"clusterIP":"None","internalTrafficPolicy":"Local"}}`,
			trafficpolicy.Service{Name: "c", Headless: true, InternalTrafficPolicy: trafficpolicy.InternalLocal}},
		{"externalTrafficPolicy on a ClusterIP Service with external IPs",
			"apiVersion: v1\nkind: Service\nmetadata: {name: d}\nspec: {externalIPs: [192.0.2.1], externalTrafficPolicy: Local}\n",
			trafficpolicy.Service{Name: "d", ExternalIPs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, ExternalTrafficPolicy: trafficpolicy.ExternalLocal}},
		// A directive was cut off as a document of its own, which YAML
		// refuses ("did not find expected <document start>").
		{"a %YAML directive before the document",
			"%YAML 1.1\n# a comment\n---\napiVersion: v1\nkind: Service\nmetadata: {name: j}\n",
			trafficpolicy.Service{Name: "j"}},
		{"a %YAML directive before a later document",
			"apiVersion: apps/v1\nkind: Deployment\n...\n%YAML 1.1\n--- # the Service\napiVersion: v1\nkind: Service\nmetadata: {name: k}\n",
			trafficpolicy.Service{Name: "k"}},
		{"Lists nested 8 deep",
			strings.Repeat(`{"kind":"List","items":[`, 8) + `{"apiVersion":"v1","kind":"Service","metadata":{"name":"n"}}` + strings.Repeat(`]}`, 8),
			trafficpolicy.Service{Name: "n"}},
		{"a List from kubectl get -o yaml",
			"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n- apiVersion: v1\n  kind: Service\n  metadata: {name: e}\n  spec: {type: NodePort}\n",
			trafficpolicy.Service{Name: "e", Type: trafficpolicy.TypeNodePort}},
		{"source ranges from the annotation; MetalLB is passthrough",
			"apiVersion: v1\nkind: Service\nmetadata:\n  name: f\n  annotations:\n    service.beta.kubernetes.io/load-balancer-source-ranges: \"10.0.0.0/8, 192.168.0.0/16\"\n    metallb.io/address-pool: public\nspec: {type: LoadBalancer}\n",
			trafficpolicy.Service{Name: "f", Type: trafficpolicy.TypeLoadBalancer, LB: trafficpolicy.LBPassthrough, LBHint: "metallb.io/address-pool",
				LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16")}}},
		{"a Service in flow style on the \"---\" line, after a Deployment",
			"apiVersion: apps/v1\nkind: Deployment\n--- {apiVersion: v1, kind: Service, metadata: {name: h}, spec: {type: NodePort}}\n",
			trafficpolicy.Service{Name: "h", Type: trafficpolicy.TypeNodePort}},
		{"CRLF line endings and a leading separator",
			"---\r\napiVersion: v1\r\nkind: Service\r\nmetadata: {name: g}\r\n---\r\n",
			trafficpolicy.Service{Name: "g"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.manifest))
			require.NoError(t, err)
			require.True(t, equalService(got, tt.want), "got  %+v\nwant %+v", got, tt.want)
		})
	}
}

func equalService(a, b trafficpolicy.Service) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && a.Type == b.Type &&
		a.ExternalTrafficPolicy == b.ExternalTrafficPolicy && a.InternalTrafficPolicy == b.InternalTrafficPolicy &&
		a.TrafficDistribution == b.TrafficDistribution && a.Headless == b.Headless &&
		a.HealthCheckNodePort == b.HealthCheckNodePort && slices.Equal(a.LoadBalancerSourceRanges, b.LoadBalancerSourceRanges) &&
		slices.Equal(a.ExternalIPs, b.ExternalIPs) && slices.Equal(a.Ports, b.Ports) && slices.Equal(a.Ingress, b.Ingress) &&
		a.LB == b.LB && a.LBHint == b.LBHint
}

// TestParseErrors pins the API server's Service rules (validation.go,
// reference Part B.6) that concern traffic policy, one per row.
func TestParseErrors(t *testing.T) {
	svc := func(spec string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n" + spec
	}
	tests := []struct {
		name     string
		manifest string
		wantErr  error
		mention  string
	}{
		{"healthCheckNodePort only with LoadBalancer + Local: Cluster", svc("  type: LoadBalancer\n  healthCheckNodePort: 32000\n"), ErrInvalidService, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"},
		{"healthCheckNodePort only with LoadBalancer + Local: NodePort", svc("  type: NodePort\n  externalTrafficPolicy: Local\n  healthCheckNodePort: 32000\n"), ErrInvalidService, "spec.healthCheckNodePort"},
		{"healthCheckNodePort in port range", svc("  type: LoadBalancer\n  externalTrafficPolicy: Local\n  healthCheckNodePort: 70000\n"), ErrInvalidService, "between 1 and 65535"},
		{"externalTrafficPolicy only on externally-accessible Services", svc("  externalTrafficPolicy: Cluster\n"), ErrInvalidService, "may only be set for externally-accessible services"},
		{"externalTrafficPolicy spelling is case-sensitive", svc("  type: NodePort\n  externalTrafficPolicy: local\n"), ErrInvalidService, "unsupported value \"local\""},
		{"internalTrafficPolicy values", svc("  internalTrafficPolicy: Node\n"), ErrInvalidService, "spec.internalTrafficPolicy"},
		{"trafficDistribution values", svc("  trafficDistribution: PreferFar\n"), ErrInvalidService, "spec.trafficDistribution"},
		{"trafficDistribution empty string is not unset", svc("  trafficDistribution: \"\"\n"), ErrInvalidService, "spec.trafficDistribution"},
		{"type values", svc("  type: Ingress\n"), ErrInvalidService, "spec.type"},
		{"nodePort not on ClusterIP", svc("  ports: [{port: 80, nodePort: 30080}]\n"), ErrInvalidService, "may not be used when `type` is 'ClusterIP'"},
		{"port range", svc("  ports: [{port: 0}]\n"), ErrInvalidService, "spec.ports[0].port"},
		{"nodePort range", svc("  type: NodePort\n  ports: [{port: 80, nodePort: 65536}]\n"), ErrInvalidService, "spec.ports[0].nodePort"},
		{"protocol values", svc("  ports: [{port: 80, protocol: tcp}]\n"), ErrInvalidService, "spec.ports[0].protocol"},
		{"loadBalancerSourceRanges only on LoadBalancer", svc("  type: NodePort\n  loadBalancerSourceRanges: [10.0.0.0/8]\n"), ErrInvalidService, "may only be used when `type` is 'LoadBalancer'"},
		{"loadBalancerSourceRanges are CIDRs", svc("  type: LoadBalancer\n  loadBalancerSourceRanges: [10.0.0.1]\n"), ErrInvalidService, "spec.loadBalancerSourceRanges[0]"},
		{"externalIPs are addresses", svc("  externalIPs: [example.com]\n"), ErrInvalidService, "spec.externalIPs[0]"},
		{"ipMode values", svc("  type: LoadBalancer\nstatus: {loadBalancer: {ingress: [{ip: 192.0.2.1, ipMode: Direct}]}}\n"), ErrInvalidService, "ingress[0].ipMode"},
		{"ipMode needs ip", svc("  type: LoadBalancer\nstatus: {loadBalancer: {ingress: [{hostname: lb.example, ipMode: VIP}]}}\n"), ErrInvalidService, "may only be set when `ip` is set"},
		{"ingress ip is an address", svc("  type: LoadBalancer\nstatus: {loadBalancer: {ingress: [{ip: 192.0.2.300}]}}\n"), ErrInvalidService, "ingress[0].ip"},
		{"Service is core v1 only", "apiVersion: v2\nkind: Service\n", ErrMalformedManifest, "apiVersion"},
		{"a port is a number, not a string", svc("  ports: [{port: \"80\"}]\n"), ErrMalformedManifest, "spec.ports.port"},
		{"duplicate keys are ambiguous", svc("  type: NodePort\n  type: ClusterIP\n"), ErrMalformedManifest, "document 1"},
		{"YAML syntax", "apiVersion: v1\nkind: Service\nspec: [unclosed\n", ErrMalformedManifest, "document 1"},
		{"no Service", "apiVersion: v1\nkind: ConfigMap\n---\n# only a comment\n", ErrNoService, ""},
		{"empty input", "", ErrNoService, ""},
		{"two Services", svc("  type: NodePort\n") + "---\n" + svc("  type: NodePort\n"), ErrManyServices, "found 2"},
		// Every List level decoded its whole subtree again: 4900 nested
		// Lists, 127 KB, took 2 s and allocated 1 GB.
		{"Lists nested deeper than 8", strings.Repeat(`{"kind":"List","items":[`, 4900) + `{"apiVersion":"v1","kind":"Service"}` + strings.Repeat(`]}`, 4900),
			ErrMalformedManifest, "Lists nested more than 8 deep"},
		// A document marker followed by content on its line ends the document
		// before it as a bare "---" does; so does the end marker "...". The
		// YAML converter reads only the first document of what it is given,
		// so the second Service was silently dropped and the answer was about
		// the first alone.
		{"two Services, the second after \"--- !!map\"", svc("  type: NodePort\n") + "--- !!map\n" + svc("  type: NodePort\n"), ErrManyServices, "found 2"},
		{"two Services, the second after \"--- &anchor\"", svc("  type: NodePort\n") + "--- &svc\n" + svc("  type: NodePort\n"), ErrManyServices, "found 2"},
		{"two Services, the second a flow mapping on the \"---\" line", svc("  type: NodePort\n") + "--- {apiVersion: v1, kind: Service, metadata: {name: y}}\n", ErrManyServices, "found 2"},
		{"two Services, the second after the end marker \"...\"", svc("  type: NodePort\n") + "...\n" + svc("  type: NodePort\n"), ErrManyServices, "found 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.manifest))
			require.ErrorIs(t, err, tt.wantErr)
			require.ErrorContains(t, err, tt.mention)
		})
	}
}

// TestInferLBAWS pins the AWS combinations: cloud-provider-aws's NLB
// registers instance targets, which keep the client's address (client IP
// preservation is on by default for them), so with proxy protocol it sends
// the header from the client; it was inferred as a proxy from its own
// address, whose recipe refuses such headers.
func TestInferLBAWS(t *testing.T) {
	const pp, typ = "service.beta.kubernetes.io/aws-load-balancer-proxy-protocol", "service.beta.kubernetes.io/aws-load-balancer-type"
	const tt, tga = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type", "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"
	tests := []struct {
		name string
		ann  map[string]string
		want trafficpolicy.LBKind
	}{
		{"NLB with proxy protocol: passthrough with a header", map[string]string{typ: "nlb", pp: "*"}, trafficpolicy.LBPassthroughProxyProtocol},
		{"NLB without: passthrough", map[string]string{typ: "nlb"}, trafficpolicy.LBPassthrough},
		{"classic ELB with proxy protocol: a proxy", map[string]string{pp: "*"}, trafficpolicy.LBProxyProtocol},
		// The AWS Load Balancer Controller: client IP preservation is on by
		// default for instance targets (its default target type), off for
		// IP targets over TCP, and set by the target group attribute
		// preserve_client_ip.enabled (AWS, "Edit target group attributes
		// for your Network Load Balancer").
		{"LB Controller NLB, instance targets by default, with proxy protocol: passthrough with a header", map[string]string{typ: "external", pp: "*"}, trafficpolicy.LBPassthroughProxyProtocol},
		{"LB Controller NLB, instance targets, preservation off: a proxy", map[string]string{typ: "external", pp: "*", tt: "instance", tga: "stickiness.enabled=false, preserve_client_ip.enabled=false"}, trafficpolicy.LBProxyProtocol},
		{"LB Controller NLB, IP targets: a proxy", map[string]string{typ: "external", pp: "*", tt: "ip"}, trafficpolicy.LBProxyProtocol},
		{"LB Controller NLB, IP targets, preservation on: passthrough with a header", map[string]string{typ: "external", pp: "*", tt: "ip", tga: "preserve_client_ip.enabled=true"}, trafficpolicy.LBPassthroughProxyProtocol},
		{"LB Controller nlb-ip: a proxy", map[string]string{typ: "nlb-ip", pp: "*"}, trafficpolicy.LBProxyProtocol},
		{"LB Controller NLB, instance targets, no proxy protocol: passthrough", map[string]string{typ: "external", tt: "instance"}, trafficpolicy.LBPassthrough},
		{"LB Controller NLB, IP targets, no proxy protocol: the client is lost", map[string]string{typ: "external", tt: "ip"}, trafficpolicy.LBFullProxy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, hint := inferLB(tt.ann)
			require.Equal(t, tt.want, got)
			if tt.ann[pp] != "" {
				require.Equal(t, pp, hint)
			}
		})
	}
}

func TestInferLB(t *testing.T) {
	tests := []struct {
		key, value string
		want       trafficpolicy.LBKind
	}{
		{"service.beta.kubernetes.io/aws-load-balancer-proxy-protocol", "*", trafficpolicy.LBProxyProtocol},
		{"service.beta.kubernetes.io/aws-load-balancer-proxy-protocol", "true", trafficpolicy.LBUnknown}, // AWS accepts only "*"
		{"service.beta.kubernetes.io/do-loadbalancer-enable-proxy-protocol", "true", trafficpolicy.LBProxyProtocol},
		{"service.beta.kubernetes.io/do-loadbalancer-enable-proxy-protocol", "false", trafficpolicy.LBUnknown},
		{"load-balancer.hetzner.cloud/uses-proxyprotocol", "true", trafficpolicy.LBProxyProtocol},
		{"service.beta.kubernetes.io/linode-loadbalancer-default-proxy-protocol", "v2", trafficpolicy.LBProxyProtocol},
		{"service.beta.kubernetes.io/linode-loadbalancer-proxy-protocol", "none", trafficpolicy.LBUnknown},
		{"loadbalancer.openstack.org/proxy-protocol", "v2", trafficpolicy.LBProxyProtocol},
		{"service.beta.kubernetes.io/ovh-loadbalancer-proxy-protocol", "v2-ssl", trafficpolicy.LBProxyProtocol},
		{"service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v2", "*", trafficpolicy.LBProxyProtocol},
		{"service.beta.kubernetes.io/aws-load-balancer-type", "nlb", trafficpolicy.LBPassthrough},
		{"metallb.universe.tf/address-pool", "default", trafficpolicy.LBPassthrough},
		{"example.com/anything", "true", trafficpolicy.LBUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			got, hint := inferLB(map[string]string{tt.key: tt.value})
			require.Equal(t, tt.want, got)
			require.Equal(t, got != trafficpolicy.LBUnknown, hint == tt.key, "hint %q", hint)
		})
	}
}
