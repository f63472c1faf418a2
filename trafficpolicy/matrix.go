package trafficpolicy

import "strings"

// knownLBKinds are the load-balancer kinds a matrix shows when a Service's
// own kind is not known.
var knownLBKinds = [...]LBKind{LBPassthrough, LBProxyProtocol, LBPassthroughProxyProtocol, LBXForwardedFor, LBFullProxy}

// Cases returns the questions worth asking about s, one per caller path it
// opens: pods to the cluster IP (unless headless or ExternalName), external
// clients to a node port, and for LoadBalancer Services external clients
// through the load balancer and pods to the load-balancer IP, once per
// ipMode of its ingress. When s.LB is unknown the load-balancer rows are
// repeated for every known kind. Every Case assumes the node has a local
// endpoint; the matrix's fallback column answers the other half.
func (s Service) Cases() []Case {
	base := Case{
		Type:          s.Type,
		External:      s.ExternalTrafficPolicy,
		Internal:      s.InternalTrafficPolicy,
		Distribution:  s.TrafficDistribution,
		LB:            s.LB,
		LocalEndpoint: true,
	}
	var out []Case
	add := func(p Path, m IPMode, lb LBKind) {
		c := base
		c.Path, c.IPMode, c.LB = p, m, lb
		out = append(out, c)
	}
	kinds := []LBKind{s.LB}
	if s.LB == LBUnknown {
		kinds = knownLBKinds[:]
	}
	if s.Type != TypeExternalName && !s.Headless {
		add(PathClusterIP, IPModeVIP, s.LB)
	}
	if s.Type.externallyAccessible() {
		add(PathNodePort, IPModeVIP, s.LB)
	}
	if s.Type == TypeLoadBalancer {
		modes := s.IPModes()
		for _, lb := range kinds {
			add(PathLoadBalancer, modes[0], lb)
		}
		for _, m := range modes {
			if m == IPModeVIP {
				add(PathPodToLoadBalancerIP, m, s.LB)
				continue
			}
			for _, lb := range kinds {
				add(PathPodToLoadBalancerIP, m, lb)
			}
		}
	}
	return out
}

// Matrix returns [Expect] of every one of s's [Service.Cases].
func (s Service) Matrix() []Expectation {
	cases := s.Cases()
	out := make([]Expectation, len(cases))
	for i, c := range cases {
		out[i] = Expect(c)
	}
	return out
}

// FullMatrix returns the expectations for every caller path under both
// values of the policy that governs it, for every known load-balancer kind
// where the load balancer matters: the reference table of this package.
// Pod-to-VIP rows use a PROXY-protocol load balancer, the kind for which that
// path surprises.
func FullMatrix() []Expectation {
	var out []Expectation
	add := func(c Case) {
		c.LocalEndpoint = true
		out = append(out, Expect(c))
	}
	for _, p := range []InternalTrafficPolicy{InternalCluster, InternalLocal} {
		add(Case{Type: TypeClusterIP, Internal: p, Path: PathClusterIP})
	}
	for _, p := range []ExternalTrafficPolicy{ExternalCluster, ExternalLocal} {
		add(Case{Type: TypeNodePort, External: p, Path: PathNodePort})
	}
	for _, p := range []ExternalTrafficPolicy{ExternalCluster, ExternalLocal} {
		for _, lb := range knownLBKinds {
			add(Case{Type: TypeLoadBalancer, External: p, Path: PathLoadBalancer, LB: lb})
		}
	}
	for _, p := range []ExternalTrafficPolicy{ExternalCluster, ExternalLocal} {
		add(Case{Type: TypeLoadBalancer, External: p, Path: PathPodToLoadBalancerIP, LB: LBProxyProtocol})
	}
	for _, p := range []ExternalTrafficPolicy{ExternalCluster, ExternalLocal} {
		for _, lb := range knownLBKinds {
			add(Case{Type: TypeLoadBalancer, External: p, Path: PathPodToLoadBalancerIP, IPMode: IPModeProxy, LB: lb})
		}
	}
	return out
}

// Caller says who calls on the case's path, for people: "pod" or
// "external client".
func (e Expectation) Caller() string {
	if e.Case.Path == PathClusterIP || e.Case.Path == PathPodToLoadBalancerIP {
		return "pod"
	}
	return "external client"
}

// Route describes the way the connection takes, for people: who connects,
// what it passes and which kube-proxy chain decides.
func (e Expectation) Route() string {
	c := e.Case
	var b strings.Builder
	switch c.Path {
	case PathClusterIP:
		b.WriteString("pod → cluster IP")
	case PathNodePort:
		b.WriteString("client → node port")
	case PathLoadBalancer:
		b.WriteString("client → LB (" + c.LB.describe() + ") → node")
	case PathPodToLoadBalancerIP:
		if c.IPMode == IPModeProxy {
			b.WriteString("pod → LB (" + c.LB.describe() + ", ipMode Proxy) → node")
		} else {
			b.WriteString("pod → LB IP, captured on the pod's node")
		}
	}
	switch {
	case e.Outcome == NotExposed:
		b.WriteString(" → not exposed")
	case e.Outcome == Dropped:
		b.WriteString(" → DROP")
	case c.Path == PathClusterIP && e.Endpoints == EndpointsLocal:
		b.WriteString(" → KUBE-SVL → local endpoint")
	case c.Path == PathClusterIP:
		b.WriteString(" → KUBE-SVC → any endpoint")
	case e.Endpoints == EndpointsLocal:
		b.WriteString(" → KUBE-EXT → KUBE-SVL → local endpoint")
	case e.Peer == PeerNode:
		b.WriteString(" → KUBE-EXT (MASQ) → KUBE-SVC → any endpoint")
	default:
		b.WriteString(" → KUBE-EXT (pod short-circuit) → KUBE-SVC → any endpoint")
	}
	return b.String()
}

// Fallback describes what happens on a node without a local endpoint, for
// people: the same case answered with LocalEndpoint false.
func (e Expectation) Fallback() string {
	c := e.Case
	c.LocalEndpoint = false
	f := Expect(c)
	switch {
	case f.Outcome == NotExposed:
		return "n/a"
	case f.Outcome == Dropped && f.Health == HealthCheckNodePort:
		return "dropped; the LB health check (503) steers traffic away"
	case f.Outcome == Dropped:
		return "dropped"
	case e.Case.Path == PathPodToLoadBalancerIP && e.Case.IPMode == IPModeVIP && c.External == ExternalLocal:
		return "other nodes' endpoints (short-circuit ignores Local)"
	}
	return "other nodes' endpoints"
}

// Describe says what keeps traffic away from nodes that cannot serve, for
// people, such as "LB probes healthCheckNodePort".
func (h HealthCheck) Describe() string {
	switch h {
	case HealthCheckNodePort:
		return "LB probes healthCheckNodePort"
	case HealthNodeProxy:
		return "LB probes the node (kube-proxy :10256 or traffic port)"
	case HealthReadiness:
		return "endpoint readiness only"
	}
	return "none: the caller picks the node"
}

// Policy names the policy that governs the case's path, for people:
// "internal Cluster", "external Local", with the trafficDistribution when it
// narrows the endpoints.
func (e Expectation) Policy() string {
	c := e.Case
	var p string
	switch c.Path {
	case PathClusterIP:
		p = "internal " + c.Internal.String()
	default:
		p = "external " + c.External.String()
	}
	if c.Distribution != DistributionDefault && (e.Endpoints == EndpointsPreferSameZone || e.Endpoints == EndpointsPreferSameNode) {
		p += ", " + c.Distribution.String()
	}
	return p
}
