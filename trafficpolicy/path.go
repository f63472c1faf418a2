package trafficpolicy

// Path is the way a caller reaches a Service's backends: from outside the
// cluster through the load balancer or straight to a node port, or from a pod
// to the cluster IP or to the load balancer's address.
type Path uint8

const (
	// PathLoadBalancer: an external client connects to the load balancer,
	// which forwards to a node (to the load-balancer IP kube-proxy captures on
	// every node, or to the Service's node port).
	PathLoadBalancer Path = iota
	// PathNodePort: an external client connects straight to a node's node port.
	PathNodePort
	// PathClusterIP: a pod connects to the Service's cluster IP.
	PathClusterIP
	// PathPodToLoadBalancerIP: a pod connects to the load balancer's IP. With
	// [IPModeVIP] kube-proxy captures that IP on the pod's own node and the
	// load balancer is never involved; with [IPModeProxy] the connection
	// really goes out through the load balancer.
	PathPodToLoadBalancerIP
)

var pathNames = []string{"LoadBalancer", "NodePort", "ClusterIP", "PodToLoadBalancerIP"}

// String returns "LoadBalancer", "NodePort", "ClusterIP" or "PodToLoadBalancerIP".
func (p Path) String() string { return enumString(pathNames, p, "Path") }

// MarshalText implements [encoding.TextMarshaler].
func (p Path) MarshalText() ([]byte, error) { return enumMarshal(pathNames, p, "Path") }

// UnmarshalText implements [encoding.TextUnmarshaler].
func (p *Path) UnmarshalText(text []byte) error {
	v, err := enumUnmarshal[Path](pathNames, text, "Path")
	if err == nil {
		*p = v
	}
	return err
}

// caller describes who is calling on the path.
func (p Path) caller() string {
	switch p {
	case PathLoadBalancer:
		return "external client via the load balancer"
	case PathNodePort:
		return "external client straight to a node port"
	case PathClusterIP:
		return "pod to the cluster IP"
	case PathPodToLoadBalancerIP:
		return "pod to the load-balancer IP"
	}
	return p.String()
}

// LBKind is what a load balancer does to a connection on its way to a node.
// Kubernetes has no field for it: the trafficpolicy/manifest module infers
// it from well-known annotations where it can. The zero value is [LBUnknown].
type LBKind uint8

const (
	// LBUnknown: the kind is not known. Expect answers every question about
	// the load-balancer path with "cannot tell", and never recommends trust.
	LBUnknown LBKind = iota
	// LBPassthrough ("Passthrough"): an L4 load balancer that forwards the
	// client's packets with their source address intact (GCP and Azure
	// network load balancers, MetalLB, AWS NLB instance targets with client
	// IP preservation and without proxy protocol). A dual-stack AWS NLB
	// keeps only IPv4 clients' addresses: an IPv6 client reaches an IPv4
	// target from the load balancer's address, and is lost. List the NLB's
	// addresses in [Network].LoadBalancers so that such connections are
	// flagged as masqueraded instead of taken for clients.
	LBPassthrough
	// LBProxyProtocol ("ProxyProtocol"): an L4 proxy that opens its own
	// connection from its own address and sends a PROXY protocol header with
	// the client's address first (classic ELB with proxy protocol, AWS NLB
	// with proxy protocol and client IP preservation off, HAProxy
	// send-proxy, DigitalOcean, Hetzner, Scaleway, …).
	//
	// An AWS NLB with instance targets keeps client IP preservation on by
	// default: with proxy protocol it sends the header from the client's own
	// address, which is [LBPassthroughProxyProtocol], not this kind.
	LBProxyProtocol
	// LBXForwardedFor ("XForwardedFor"): an L7 HTTP proxy that connects from
	// its own address and appends the client to X-Forwarded-For.
	LBXForwardedFor
	// LBFullProxy ("FullProxy"): a proxy that connects from its own address
	// and passes on nothing about the client (a TCP proxy without PROXY
	// protocol, an HTTP proxy that does not write X-Forwarded-For).
	LBFullProxy
	// LBPassthroughProxyProtocol ("PassthroughProxyProtocol"): an L4 load
	// balancer that forwards the client's packets with their source address
	// intact and also puts a PROXY protocol header naming the client in
	// front: an AWS NLB with proxy protocol v2 and client IP preservation,
	// which is on by default for instance targets (those of
	// cloud-provider-aws's NLBs). Under externalTrafficPolicy Local an IPv4
	// client's header arrives from the client's own address, so the
	// backend's PROXY listener must discard headers from peers it does not
	// trust (proxyproto.UntrustedIgnore): closing them refuses every client,
	// and trusting the senders would trust every client. An IPv6 client of a
	// dual-stack NLB arrives from the load balancer's IPv4 address, its
	// header naming it, so the recipe trusts the load balancers as well.
	LBPassthroughProxyProtocol
)

var lbKindNames = []string{"Unknown", "Passthrough", "ProxyProtocol", "XForwardedFor", "FullProxy", "PassthroughProxyProtocol"}

// String returns the kind's name, such as "ProxyProtocol".
func (k LBKind) String() string { return enumString(lbKindNames, k, "LBKind") }

// MarshalText implements [encoding.TextMarshaler].
func (k LBKind) MarshalText() ([]byte, error) { return enumMarshal(lbKindNames, k, "LBKind") }

// UnmarshalText implements [encoding.TextUnmarshaler].
func (k *LBKind) UnmarshalText(text []byte) error {
	v, err := enumUnmarshal[LBKind](lbKindNames, text, "LBKind")
	if err == nil {
		*k = v
	}
	return err
}

// sendsProxyHeader reports whether the load balancer puts a PROXY header in
// front of the connections it forwards.
func (k LBKind) sendsProxyHeader() bool {
	return k == LBProxyProtocol || k == LBPassthroughProxyProtocol
}

func (k LBKind) describe() string {
	switch k {
	case LBPassthrough:
		return "L4 passthrough"
	case LBProxyProtocol:
		return "L4 + PROXY protocol"
	case LBXForwardedFor:
		return "L7 + X-Forwarded-For"
	case LBFullProxy:
		return "full proxy, no client info"
	case LBPassthroughProxyProtocol:
		return "L4 passthrough + PROXY protocol"
	}
	return "unknown kind"
}
