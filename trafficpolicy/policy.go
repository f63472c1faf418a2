package trafficpolicy

// ServiceType is a Service's spec.type. The zero value is [TypeClusterIP],
// the API server's default.
type ServiceType uint8

const (
	TypeClusterIP    ServiceType = iota // "ClusterIP": reachable inside the cluster only
	TypeNodePort                        // "NodePort": also on a port of every node
	TypeLoadBalancer                    // "LoadBalancer": also through a cloud or bare-metal load balancer
	TypeExternalName                    // "ExternalName": a DNS alias; kube-proxy does nothing for it
)

var serviceTypeNames = []string{"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"}

// String returns the Kubernetes spelling, such as "LoadBalancer".
func (t ServiceType) String() string { return enumString(serviceTypeNames, t, "ServiceType") }

// MarshalText implements [encoding.TextMarshaler] with the Kubernetes spelling.
func (t ServiceType) MarshalText() ([]byte, error) {
	return enumMarshal(serviceTypeNames, t, "ServiceType")
}

// UnmarshalText implements [encoding.TextUnmarshaler]. The empty string is
// the API default, ClusterIP.
func (t *ServiceType) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*t = TypeClusterIP
		return nil
	}
	v, err := enumUnmarshal[ServiceType](serviceTypeNames, text, "ServiceType")
	if err == nil {
		*t = v
	}
	return err
}

// externallyAccessible reports whether the type opens node ports (and maybe a
// load balancer), which is when externalTrafficPolicy applies.
func (t ServiceType) externallyAccessible() bool {
	return t == TypeNodePort || t == TypeLoadBalancer
}

// ExternalTrafficPolicy is a Service's spec.externalTrafficPolicy: how nodes
// route traffic that arrives on a node port, a load-balancer address or an
// external IP. The zero value is [ExternalCluster], the API server's default.
type ExternalTrafficPolicy uint8

const (
	// ExternalCluster ("Cluster") sends external traffic to any ready
	// endpoint in the cluster and masquerades it to the node's address, so
	// the client's address is lost at the IP layer.
	ExternalCluster ExternalTrafficPolicy = iota
	// ExternalLocal ("Local") sends external traffic only to endpoints on the
	// node that received it, without masquerading, and drops it on nodes
	// without one; load balancers learn which nodes those are from the
	// Service's healthCheckNodePort.
	ExternalLocal
)

var trafficPolicyNames = []string{"Cluster", "Local"}

// String returns "Cluster" or "Local".
func (p ExternalTrafficPolicy) String() string {
	return enumString(trafficPolicyNames, p, "ExternalTrafficPolicy")
}

// MarshalText implements [encoding.TextMarshaler].
func (p ExternalTrafficPolicy) MarshalText() ([]byte, error) {
	return enumMarshal(trafficPolicyNames, p, "ExternalTrafficPolicy")
}

// UnmarshalText implements [encoding.TextUnmarshaler]. The empty string is
// the API default, Cluster.
func (p *ExternalTrafficPolicy) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*p = ExternalCluster
		return nil
	}
	v, err := enumUnmarshal[ExternalTrafficPolicy](trafficPolicyNames, text, "ExternalTrafficPolicy")
	if err == nil {
		*p = v
	}
	return err
}

// InternalTrafficPolicy is a Service's spec.internalTrafficPolicy: how
// traffic from inside the cluster to the Service's cluster IP is routed. The
// zero value is [InternalCluster], the API server's default.
type InternalTrafficPolicy uint8

const (
	// InternalCluster ("Cluster") sends cluster-IP traffic to any ready endpoint.
	InternalCluster InternalTrafficPolicy = iota
	// InternalLocal ("Local") sends cluster-IP traffic only to endpoints on
	// the caller's node and drops it when there is none.
	InternalLocal
)

// String returns "Cluster" or "Local".
func (p InternalTrafficPolicy) String() string {
	return enumString(trafficPolicyNames, p, "InternalTrafficPolicy")
}

// MarshalText implements [encoding.TextMarshaler].
func (p InternalTrafficPolicy) MarshalText() ([]byte, error) {
	return enumMarshal(trafficPolicyNames, p, "InternalTrafficPolicy")
}

// UnmarshalText implements [encoding.TextUnmarshaler]. The empty string is
// the API default, Cluster.
func (p *InternalTrafficPolicy) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*p = InternalCluster
		return nil
	}
	v, err := enumUnmarshal[InternalTrafficPolicy](trafficPolicyNames, text, "InternalTrafficPolicy")
	if err == nil {
		*p = v
	}
	return err
}

// TrafficDistribution is a Service's spec.trafficDistribution: a preference
// for topologically close endpoints among those the traffic policy allows. It
// changes which endpoint serves a connection, never whether the client's
// address survives. The zero value is [DistributionDefault]: no preference.
type TrafficDistribution uint8

const (
	// DistributionDefault (the field unset, "") spreads traffic over every
	// endpoint the traffic policy allows.
	DistributionDefault TrafficDistribution = iota
	// PreferClose ("PreferClose") is the original spelling of
	// PreferSameZone (Kubernetes 1.30–1.33); since 1.33 a deprecated alias of it.
	PreferClose
	// PreferSameZone ("PreferSameZone") prefers endpoints in the caller's
	// zone when there are any (Kubernetes 1.33+, GA in 1.35).
	PreferSameZone
	// PreferSameNode ("PreferSameNode") prefers endpoints on the caller's
	// node when there are any (Kubernetes 1.33+, GA in 1.35).
	PreferSameNode
)

var distributionNames = []string{"", "PreferClose", "PreferSameZone", "PreferSameNode"}

// String returns the Kubernetes spelling, or "" for DistributionDefault.
func (d TrafficDistribution) String() string {
	return enumString(distributionNames, d, "TrafficDistribution")
}

// MarshalText implements [encoding.TextMarshaler].
func (d TrafficDistribution) MarshalText() ([]byte, error) {
	return enumMarshal(distributionNames, d, "TrafficDistribution")
}

// UnmarshalText implements [encoding.TextUnmarshaler]; "" is DistributionDefault.
func (d *TrafficDistribution) UnmarshalText(text []byte) error {
	v, err := enumUnmarshal[TrafficDistribution](distributionNames, text, "TrafficDistribution")
	if err == nil {
		*d = v
	}
	return err
}

// IPMode is a load-balancer ingress entry's status.loadBalancer.ingress[].ipMode.
// The zero value is [IPModeVIP], which is also what an absent field means.
type IPMode uint8

const (
	// IPModeVIP ("VIP"): the load balancer delivers packets addressed to its
	// own IP, so kube-proxy captures that IP on every node, and in-cluster
	// callers of it are short-circuited to the Service without ever reaching
	// the load balancer.
	IPModeVIP IPMode = iota
	// IPModeProxy ("Proxy"): the load balancer rewrites the destination to a
	// node or pod address, so kube-proxy leaves its IP alone and in-cluster
	// callers really go through it (and get its PROXY header or
	// X-Forwarded-For). Kubernetes 1.29+, GA in 1.32.
	IPModeProxy
)

var ipModeNames = []string{"VIP", "Proxy"}

// String returns "VIP" or "Proxy".
func (m IPMode) String() string { return enumString(ipModeNames, m, "IPMode") }

// MarshalText implements [encoding.TextMarshaler].
func (m IPMode) MarshalText() ([]byte, error) { return enumMarshal(ipModeNames, m, "IPMode") }

// UnmarshalText implements [encoding.TextUnmarshaler]; "" is VIP.
func (m *IPMode) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*m = IPModeVIP
		return nil
	}
	v, err := enumUnmarshal[IPMode](ipModeNames, text, "IPMode")
	if err == nil {
		*m = v
	}
	return err
}
