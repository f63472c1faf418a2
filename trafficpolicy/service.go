package trafficpolicy

import (
	"net/netip"
	"slices"
)

// Service is what this package needs to know about a Kubernetes Service: its
// type, its traffic policies, its ports and load-balancer status, and the
// kind of load balancer in front of it. Build it by hand, or let the
// trafficpolicy/manifest module's Parse fill it from a manifest. The zero Service is a ClusterIP
// Service with default policies.
type Service struct {
	Namespace string // "" when the manifest does not say
	Name      string

	Type                  ServiceType
	ExternalTrafficPolicy ExternalTrafficPolicy // ExternalCluster unless the manifest says Local
	InternalTrafficPolicy InternalTrafficPolicy
	TrafficDistribution   TrafficDistribution

	// Headless reports spec.clusterIP "None": kube-proxy installs nothing and
	// pods connect straight to endpoint addresses, keeping their own.
	Headless bool

	// HealthCheckNodePort is spec.healthCheckNodePort, or 0 when the manifest
	// leaves it to the API server to allocate.
	HealthCheckNodePort uint16

	// LoadBalancerSourceRanges is spec.loadBalancerSourceRanges, or else the
	// service.beta.kubernetes.io/load-balancer-source-ranges annotation.
	LoadBalancerSourceRanges []netip.Prefix

	ExternalIPs []netip.Addr
	Ports       []Port
	Ingress     []Ingress // status.loadBalancer.ingress

	// LB is the load balancer's kind: LBUnknown unless set by hand or
	// inferred from a well-known annotation (the trafficpolicy/manifest
	// module's Parse does that). Set it when you know better.
	LB LBKind

	// LBHint names the annotation LB was inferred from, or "".
	LBHint string
}

// Port is one entry of spec.ports.
type Port struct {
	Name     string
	Protocol string // "TCP", "UDP" or "SCTP"
	Port     uint16
	NodePort uint16 // 0 when not set (the API server allocates one for NodePort and LoadBalancer Services)
}

// Ingress is one entry of status.loadBalancer.ingress.
type Ingress struct {
	IP       netip.Addr // invalid when the entry has only a hostname
	Hostname string
	IPMode   IPMode
}

// NeedsHealthCheck reports whether kube-proxy serves a healthCheckNodePort
// for the Service: type LoadBalancer with externalTrafficPolicy Local.
func (s Service) NeedsHealthCheck() bool {
	return s.Type == TypeLoadBalancer && s.ExternalTrafficPolicy == ExternalLocal
}

// IPModes returns the distinct ipModes of the Service's load-balancer IPs
// in ascending order, or just [IPModeVIP] when it has none (what an absent
// ipMode means). Hostname-only ingress entries are not captured by kube-proxy,
// so they count as [IPModeProxy].
func (s Service) IPModes() []IPMode {
	var modes []IPMode
	for _, in := range s.Ingress {
		m := in.IPMode
		if !in.IP.IsValid() {
			m = IPModeProxy
		}
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	if len(modes) == 0 {
		return []IPMode{IPModeVIP}
	}
	slices.Sort(modes)
	return modes
}
