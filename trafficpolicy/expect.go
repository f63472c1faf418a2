package trafficpolicy

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/sourceip/sourceip/clientip"
)

// Case is one question about a Service: which policies it has, how the
// caller reaches it, what kind of load balancer is in front, and whether the
// node the traffic enters has an endpoint of its own. The zero Case is a
// ClusterIP Service with default policies, reached by an external client
// through a load balancer it does not have.
type Case struct {
	Type         ServiceType
	External     ExternalTrafficPolicy // applies to node-port and load-balancer traffic
	Internal     InternalTrafficPolicy // applies to cluster-IP traffic
	Distribution TrafficDistribution   // narrows Cluster-policy endpoint choice; never changes addresses
	IPMode       IPMode                // of the load-balancer ingress address
	Path         Path
	LB           LBKind // only consulted on paths through the load balancer

	// LocalEndpoint reports whether the node the traffic enters (for
	// in-cluster callers, the caller's own node) has a usable endpoint of
	// the Service: a ready one, or — when none is ready — a serving,
	// terminating one, which kube-proxy still forwards to although the
	// health check already answers 503.
	LocalEndpoint bool
}

// Outcome is what happens to a connection.
type Outcome uint8

const (
	// Delivered: the connection reaches an endpoint.
	Delivered Outcome = iota
	// Dropped: the node silently drops it (a Local policy on a node without
	// a local endpoint).
	Dropped
	// NotExposed: the path does not exist for this Service type (no node
	// port on a ClusterIP Service, no load balancer on a NodePort Service).
	NotExposed
)

var outcomeNames = []string{"Delivered", "Dropped", "NotExposed"}

// String returns "Delivered", "Dropped" or "NotExposed".
func (o Outcome) String() string { return enumString(outcomeNames, o, "Outcome") }

// MarshalText implements [encoding.TextMarshaler].
func (o Outcome) MarshalText() ([]byte, error) { return enumMarshal(outcomeNames, o, "Outcome") }

// UnmarshalText implements [encoding.TextUnmarshaler].
func (o *Outcome) UnmarshalText(text []byte) error {
	v, err := enumUnmarshal[Outcome](outcomeNames, text, "Outcome")
	if err == nil {
		*o = v
	}
	return err
}

// Peer is who the backend's socket sees as the remote address.
type Peer uint8

const (
	// PeerNone: nothing arrives (the connection is dropped or the path does not exist).
	PeerNone Peer = iota
	// PeerClient: the caller itself (for in-cluster callers, the calling pod).
	PeerClient
	// PeerNode: a node address, because kube-proxy masqueraded the connection.
	PeerNode
	// PeerLoadBalancer: the load balancer's own (proxy) address.
	PeerLoadBalancer
	// PeerUnknown: it depends on a load balancer whose kind is not known.
	PeerUnknown
)

var peerNames = []string{"None", "Client", "Node", "LoadBalancer", "Unknown"}

// String returns "None", "Client", "Node", "LoadBalancer" or "Unknown".
func (p Peer) String() string { return enumString(peerNames, p, "Peer") }

// MarshalText implements [encoding.TextMarshaler].
func (p Peer) MarshalText() ([]byte, error) { return enumMarshal(peerNames, p, "Peer") }

// UnmarshalText implements [encoding.TextUnmarshaler].
func (p *Peer) UnmarshalText(text []byte) error {
	v, err := enumUnmarshal[Peer](peerNames, text, "Peer")
	if err == nil {
		*p = v
	}
	return err
}

// Endpoints is the set of endpoints a connection may be sent to.
type Endpoints uint8

const (
	// EndpointsNone: none (the connection is dropped or not exposed).
	EndpointsNone Endpoints = iota
	// EndpointsLocal: only endpoints on the node the traffic entered.
	EndpointsLocal
	// EndpointsCluster: any ready endpoint in the cluster.
	EndpointsCluster
	// EndpointsPreferSameZone: any ready endpoint, preferring the caller's zone
	// (trafficDistribution PreferSameZone or PreferClose).
	EndpointsPreferSameZone
	// EndpointsPreferSameNode: any ready endpoint, preferring the caller's node
	// (trafficDistribution PreferSameNode).
	EndpointsPreferSameNode
)

var endpointsNames = []string{"None", "Local", "Cluster", "PreferSameZone", "PreferSameNode"}

// String returns the set's name, such as "Local" or "PreferSameZone".
func (s Endpoints) String() string { return enumString(endpointsNames, s, "Endpoints") }

// MarshalText implements [encoding.TextMarshaler].
func (s Endpoints) MarshalText() ([]byte, error) {
	return enumMarshal(endpointsNames, s, "Endpoints")
}

// UnmarshalText implements [encoding.TextUnmarshaler].
func (s *Endpoints) UnmarshalText(text []byte) error {
	v, err := enumUnmarshal[Endpoints](endpointsNames, text, "Endpoints")
	if err == nil {
		*s = v
	}
	return err
}

func (s Endpoints) describe() string {
	switch s {
	case EndpointsLocal:
		return "node-local endpoints only"
	case EndpointsCluster:
		return "any endpoint"
	case EndpointsPreferSameZone:
		return "any endpoint, preferring the caller's zone"
	case EndpointsPreferSameNode:
		return "any endpoint, preferring the caller's node"
	}
	return "no endpoint"
}

// HealthCheck says what keeps traffic away from nodes that cannot serve it.
type HealthCheck uint8

const (
	// HealthNone: nothing. The caller picks the node (a client dialling a node
	// port) or the path does not exist.
	HealthNone HealthCheck = iota
	// HealthCheckNodePort: the load balancer probes the Service's
	// healthCheckNodePort, which kube-proxy (or a [HealthServer]) answers with
	// 200 only on nodes with a ready local endpoint.
	HealthCheckNodePort
	// HealthNodeProxy: the load balancer probes node health (kube-proxy's
	// :10256/healthz, or the traffic port); any healthy node can serve.
	HealthNodeProxy
	// HealthReadiness: no load balancer is involved; kube-proxy follows
	// endpoint readiness (the pods' readiness probes).
	HealthReadiness
)

var healthNames = []string{"None", "HealthCheckNodePort", "NodeProxy", "Readiness"}

// String returns "None", "HealthCheckNodePort", "NodeProxy" or "Readiness".
func (h HealthCheck) String() string { return enumString(healthNames, h, "HealthCheck") }

// MarshalText implements [encoding.TextMarshaler].
func (h HealthCheck) MarshalText() ([]byte, error) {
	return enumMarshal(healthNames, h, "HealthCheck")
}

// UnmarshalText implements [encoding.TextUnmarshaler].
func (h *HealthCheck) UnmarshalText(text []byte) error {
	v, err := enumUnmarshal[HealthCheck](healthNames, text, "HealthCheck")
	if err == nil {
		*h = v
	}
	return err
}

// Trust is the set of address groups a clientip configuration must trust to
// recover the client. The zero value trusts nothing.
type Trust uint8

const (
	// TrustLoadBalancers: the load balancers' own addresses ([Network].LoadBalancers).
	TrustLoadBalancers Trust = 1 << iota
	// TrustNodes: the node addresses ([Network].Nodes), because kube-proxy
	// masquerades the load balancer's connection to them.
	TrustNodes
)

// String returns "none", "load-balancers", "nodes" or "load-balancers+nodes".
func (t Trust) String() string {
	switch t {
	case 0:
		return "none"
	case TrustLoadBalancers:
		return "load-balancers"
	case TrustNodes:
		return "nodes"
	case TrustLoadBalancers | TrustNodes:
		return "load-balancers+nodes"
	}
	return fmt.Sprintf("Trust(%d)", uint8(t))
}

// Caveat is a set of conditions an answer depends on or warns about.
type Caveat uint8

const (
	// CaveatNodePortsOpen: the answer trusts node addresses, and masquerading
	// hides who really connected to the node. Anyone who can reach a node port
	// can send a PROXY header or X-Forwarded-For that will be believed, so the
	// node ports must be reachable from the load balancer only.
	CaveatNodePortsOpen Caveat = 1 << iota
	// CaveatNoProxyHeader: the load balancer sends a PROXY header, but this
	// path bypasses it, so connections arrive without one, from the calling
	// pod's own address (externalTrafficPolicy: Local). A PROXY listener serves
	// them as direct clients as long as the pod network is not among its
	// trusted upstreams; ipMode: Proxy sends them through the load balancer.
	CaveatNoProxyHeader
	// CaveatEgressSNAT: an in-cluster caller leaves the cluster through the
	// load balancer; the load balancer sees the pod, or its node if the
	// network plugin masquerades egress traffic.
	CaveatEgressSNAT
	// CaveatHairpin: a pod that reaches itself through the Service is
	// masqueraded (KUBE-SEP: -s <endpoint> -j KUBE-MARK-MASQ).
	CaveatHairpin
	// CaveatUnknownLB: the answer depends on the load balancer's kind, which
	// is not known.
	CaveatUnknownLB
	// CaveatNoProxyHeaderFromNode: as CaveatNoProxyHeader, but the node
	// masquerades the calling pod (externalTrafficPolicy: Cluster), so the
	// headerless connection comes from a node address, which the recipe trusts
	// to send PROXY headers. A listener that requires the header refuses it;
	// allowing headerless connections from trusted upstreams serves it, and
	// clientip then flags the node as masqueraded. ipMode: Proxy sends it
	// through the load balancer instead.
	CaveatNoProxyHeaderFromNode
	// CaveatProxyHeaderFromClient: the load balancer keeps the client's
	// address and sends a PROXY header from it
	// ([LBPassthroughProxyProtocol] under externalTrafficPolicy Local), so
	// the header comes from a peer no recipe can trust. The PROXY listener
	// must read and discard headers from untrusted peers
	// (proxyproto.UntrustedIgnore); one that closes them
	// (proxyproto.UntrustedClose, the default) refuses every client. An AWS
	// NLB sends an IPv6 client's connections to IPv4 instance targets from
	// its own address, with the header naming the client: the recipe trusts
	// the load balancers for those.
	CaveatProxyHeaderFromClient
)

var caveatNames = []string{"node-ports-open", "no-proxy-header", "egress-snat", "hairpin", "unknown-lb", "no-proxy-header-from-node", "proxy-header-from-client"}

// String returns the caveats' names joined by "+", or "none".
func (c Caveat) String() string {
	if c == 0 {
		return "none"
	}
	var parts []string
	for i, n := range caveatNames {
		if c&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if rest := c &^ (1<<len(caveatNames) - 1); rest != 0 {
		parts = append(parts, fmt.Sprintf("Caveat(%#x)", uint8(rest)))
	}
	return strings.Join(parts, "+")
}

// Notes describes each caveat in c, for people, one sentence each without a
// final full stop.
func (c Caveat) Notes() []string {
	var out []string
	if c&CaveatNodePortsOpen != 0 {
		out = append(out, "node addresses are trusted, so node ports must be reachable from the load balancer only: masquerading hides who connected")
	}
	if c&CaveatNoProxyHeader != 0 {
		out = append(out, "no PROXY header arrives on this path: the pod connects from its own address, served as a direct client while the pod network is not a trusted upstream (or set ipMode: Proxy)")
	}
	if c&CaveatNoProxyHeaderFromNode != 0 {
		out = append(out, "no PROXY header arrives on this path and the node masquerades the pod: a listener that requires the header refuses this trusted node; allow headerless connections from trusted upstreams (clientip flags the node as masqueraded) or set ipMode: Proxy")
	}
	if c&CaveatProxyHeaderFromClient != 0 {
		out = append(out, "the load balancer keeps an IPv4 client's address and sends its PROXY header from it: the PROXY listener must discard headers from untrusted peers (proxyproto.UntrustedIgnore), since closing them refuses every client; an IPv6 client arrives from the load balancer with the header")
	}
	if c&CaveatEgressSNAT != 0 {
		out = append(out, "the load balancer sees the calling pod, or its node if the network plugin masquerades egress")
	}
	if c&CaveatHairpin != 0 {
		out = append(out, "a pod reaching itself through the Service is masqueraded (hairpin)")
	}
	if c&CaveatUnknownLB != 0 {
		out = append(out, "the load balancer's kind is unknown, so nothing about its addresses can be trusted")
	}
	return out
}

// Expectation is the answer to a [Case]: what the backend sees and how to
// recover the client. It is a small comparable value.
type Expectation struct {
	Case    Case
	Outcome Outcome

	// Peer is who the backend's socket sees.
	Peer Peer

	// Client is the layer in which the client's address reaches the backend:
	// [clientip.SourceSocket], [clientip.SourceProxyProtocol] or
	// [clientip.SourceXForwardedFor]; [clientip.SourceNone] when it is lost
	// (or cannot be told).
	Client clientip.Source

	// Endpoints is the set of endpoints the connection may go to.
	Endpoints Endpoints

	// Health is what steers traffic away from nodes that cannot serve it.
	Health HealthCheck

	// ProxyHeader reports whether the connection starts with the load
	// balancer's PROXY protocol header.
	ProxyHeader bool

	// Trust and Header are the clientip recipe: trust these address groups
	// and read this header ("" for none). See [Expectation.Config].
	Trust  Trust
	Header string

	Caveats Caveat

	// Rule cites the kube-proxy behaviour that decides this answer, after
	// pkg/proxy/iptables/proxier.go (chain names as in Kubernetes 1.24+).
	Rule string
}

// Recoverable reports whether the backend can name the client: the
// connection is delivered and the client's address survives in some layer.
func (e Expectation) Recoverable() bool {
	return e.Outcome == Delivered && e.Client != clientip.SourceNone
}

// Network holds the caller-supplied addresses that turn an [Expectation]
// into a clientip configuration. The zero value knows no addresses.
type Network struct {
	// Nodes holds every address a masqueraded connection can come from: the
	// nodes' IPs and each node's address on the pod network (the bridge or
	// gateway address MASQUERADE picks when the endpoint is on the same node).
	Nodes clientip.PrefixSet

	// LoadBalancers holds the addresses a proxying load balancer connects
	// from (its private addresses or subnet, or its published ranges).
	LoadBalancers clientip.PrefixSet
}

// Config returns the clientip configuration that recovers the client on
// this path: TrustedProxies from e.Trust, Header from e.Header, and
// Masquerade set to the nodes and the load balancers, the addresses that
// stand in for clients, so that a masqueraded or proxied connection whose
// client is lost is flagged with [clientip.ErrMasqueraded] instead of being
// taken for a client. When the client cannot be recovered the configuration
// trusts nothing and only flags. It returns an error wrapping
// [ErrMissingAddresses] when e.Trust names a group n leaves empty.
func (e Expectation) Config(n Network) (clientip.Config, error) {
	cfg := clientip.Config{Masquerade: n.Nodes.Union(n.LoadBalancers)}
	if !e.Recoverable() {
		return cfg, nil
	}
	if e.Trust&TrustLoadBalancers != 0 {
		if n.LoadBalancers.Len() == 0 {
			return clientip.Config{}, fmt.Errorf("%w: Network.LoadBalancers (the load balancer connects from its own address)", ErrMissingAddresses)
		}
		cfg.TrustedProxies = cfg.TrustedProxies.Union(n.LoadBalancers)
	}
	if e.Trust&TrustNodes != 0 {
		if n.Nodes.Len() == 0 {
			return clientip.Config{}, fmt.Errorf("%w: Network.Nodes (kube-proxy masquerades the load balancer's connection)", ErrMissingAddresses)
		}
		cfg.TrustedProxies = cfg.TrustedProxies.Union(n.Nodes)
	}
	cfg.Header = e.Header
	return cfg, nil
}

// Sees describes what the backend's socket sees, for people.
func (e Expectation) Sees() string {
	switch e.Peer {
	case PeerNone:
		return "nothing"
	case PeerClient:
		return "client"
	case PeerNode:
		return "node address (masqueraded)"
	case PeerLoadBalancer:
		return "load-balancer address"
	}
	return "unknown"
}

// Survives describes where the client's address survives, for people.
func (e Expectation) Survives() string {
	switch {
	case e.Outcome != Delivered:
		return "n/a"
	case e.Recoverable():
		return "yes, " + describeLayer(e.Client)
	case e.Caveats&CaveatUnknownLB != 0:
		return "cannot tell"
	}
	return "no, lost"
}

func describeLayer(s clientip.Source) string {
	switch s {
	case clientip.SourceSocket:
		return "socket"
	case clientip.SourceProxyProtocol:
		return "PROXY header"
	case clientip.SourceXForwardedFor:
		return "X-Forwarded-For"
	}
	return s.String()
}

// LogValue implements [slog.LogValuer]: the answer's fields as a group.
func (e Expectation) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("path", e.Case.Path.String()),
		slog.String("outcome", e.Outcome.String()),
		slog.String("peer", e.Peer.String()),
		slog.String("client", e.Client.String()),
		slog.String("endpoints", e.Endpoints.String()),
		slog.String("health", e.Health.String()),
		slog.String("trust", e.Trust.String()),
		slog.String("header", e.Header),
		slog.String("caveats", e.Caveats.String()),
	)
}

// Recipe describes the clientip configuration, for people. Every recipe
// also sets Masquerade to the nodes and load balancers (see [Expectation.Config]).
func (e Expectation) Recipe() string {
	switch {
	case e.Outcome != Delivered:
		return "n/a"
	case !e.Recoverable():
		return "cannot recover (Masquerade flags it)"
	case e.Trust == 0:
		return "trust nothing"
	}
	s := "trust " + e.Trust.String()
	if e.ProxyHeader {
		s += ", PROXY listener"
	}
	if e.Header != "" {
		s += ", Header " + e.Header
	}
	return s
}

// String returns the answer as sentences, with the kube-proxy rule that
// decides it.
func (e Expectation) String() string {
	var b strings.Builder
	c := e.Case
	fmt.Fprintf(&b, "%s, %s Service", upperFirst(c.Path.caller()), c.Type)
	if c.Path == PathLoadBalancer || (c.Path == PathPodToLoadBalancerIP && c.IPMode == IPModeProxy) {
		fmt.Fprintf(&b, " (%s load balancer, ipMode %s)", c.LB.describe(), c.IPMode)
	} else if c.Path == PathPodToLoadBalancerIP {
		fmt.Fprintf(&b, " (ipMode %s)", c.IPMode)
	}
	fmt.Fprintf(&b, ", %s: ", e.policyName())
	switch e.Outcome {
	case NotExposed:
		b.WriteString("the path does not exist.")
	case Dropped:
		b.WriteString("dropped: the node has no local endpoint.")
	default:
		fmt.Fprintf(&b, "delivered to %s; the backend sees the %s; ", e.Endpoints.describe(), e.Sees())
		switch {
		case e.Recoverable():
			fmt.Fprintf(&b, "the client address survives in the %s; clientip: %s.", describeLayer(e.Client), e.Recipe())
		case e.Caveats&CaveatUnknownLB != 0:
			b.WriteString("whether the client address survives depends on the load balancer's kind.")
		default:
			b.WriteString("the client address is lost and cannot be recovered.")
		}
	}
	for _, d := range e.Caveats.Notes() {
		b.WriteString(" Note: ")
		b.WriteString(d)
		b.WriteByte('.')
	}
	if e.Rule != "" {
		b.WriteString(" Rule: ")
		b.WriteString(e.Rule)
	}
	return b.String()
}

// policyName names the policy that governs the path, in full.
func (e Expectation) policyName() string {
	c := e.Case
	var p string
	switch c.Path {
	case PathClusterIP:
		p = "internalTrafficPolicy " + c.Internal.String()
	default:
		p = "externalTrafficPolicy " + c.External.String()
	}
	if c.Distribution != DistributionDefault {
		p += ", trafficDistribution " + c.Distribution.String()
	}
	return p
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
