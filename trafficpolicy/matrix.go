package trafficpolicy

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"
)

// knownLBKinds are the load-balancer kinds a matrix shows when a Service's
// own kind is not known.
var knownLBKinds = [...]LBKind{LBPassthrough, LBProxyProtocol, LBXForwardedFor, LBFullProxy}

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

func (h HealthCheck) describe() string {
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

// policyCell names the policy that governs the case's path.
func (e Expectation) policyCell() string {
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

var matrixHeader = []string{
	"Service", "Policy", "Caller", "Path", "Backend sees", "Client survives", "clientip", "Health check", "No local endpoint",
}

// RenderMatrix writes rows as a Markdown table, one row per expectation:
// service type, governing policy, caller, the path the connection takes,
// what the backend's socket sees, where the client address survives, the
// clientip recipe, what health-checks the node, and what happens on a node
// without a local endpoint. Caveats follow the table as numbered notes.
func RenderMatrix(w io.Writer, rows []Expectation) error {
	bw := bufio.NewWriter(w)
	writeRow(bw, matrixHeader)
	sep := make([]string, len(matrixHeader))
	for i := range sep {
		sep[i] = "---"
	}
	writeRow(bw, sep)
	var notes []string
	for _, e := range rows {
		caller := "external client"
		if e.Case.Path == PathClusterIP || e.Case.Path == PathPodToLoadBalancerIP {
			caller = "pod"
		}
		recipe := e.Recipe()
		for _, d := range e.Caveats.describe() {
			n := slices.Index(notes, d)
			if n < 0 {
				notes = append(notes, d)
				n = len(notes) - 1
			}
			recipe += " [" + strconv.Itoa(n+1) + "]"
		}
		writeRow(bw, []string{
			e.Case.Type.String(), e.policyCell(), caller, e.Route(), e.Sees(), e.Survives(), recipe,
			e.Health.describe(), e.Fallback(),
		})
	}
	if len(notes) > 0 {
		bw.WriteString("\n")
		for i, n := range notes {
			bw.WriteString(strconv.Itoa(i+1) + ". " + upperFirst(n) + ".\n")
		}
	}
	return bw.Flush()
}

func writeRow(w *bufio.Writer, cells []string) {
	w.WriteString("|")
	for _, c := range cells {
		w.WriteString(" ")
		w.WriteString(strings.ReplaceAll(c, "|", `\|`))
		w.WriteString(" |")
	}
	w.WriteString("\n")
}
