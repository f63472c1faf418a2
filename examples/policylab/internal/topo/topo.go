// Package topo holds the lab's addresses and the Service it runs: which
// namespace has which address in which family, the ports, and the Service
// manifests that both trafficpolicy and kube-proxy read.
package topo

import (
	_ "embed"
	"fmt"
	"net/netip"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// The lab's Service: one TCP port, exposed through a node port and three
// load-balancer addresses, with a HealthCheckNodePort while its
// externalTrafficPolicy is Local.
const (
	SvcNamespace = "lab"
	SvcName      = "echo"
	SvcPortName  = "lab/echo:http" // kube-proxy's ServicePortName, which its chain hashes are made of

	ServicePort         = 80
	TargetPort          = 8080
	NodePort            = 30080
	HealthCheckNodePort = 32080
	ProxyHealthzPort    = 10256 // kube-proxy's own /healthz, probed by load balancers under Cluster

	NumNodes   = 3
	NumClients = 2

	// The project's own health servers run beside kube-proxy's on every
	// node, for the live comparison: trafficpolicy.HealthServer for the
	// Service, trafficpolicy.NodeHealthServer for the node.
	OwnHealthPort     = 32081
	OwnNodeHealthPort = 20256
)

// The Service's manifests, one per externalTrafficPolicy.
var (
	//go:embed service-cluster.yaml
	ServiceCluster []byte
	//go:embed service-local.yaml
	ServiceLocal []byte
)

// ServiceManifest returns the manifest for policy p.
func ServiceManifest(p trafficpolicy.ExternalTrafficPolicy) []byte {
	if p == trafficpolicy.ExternalLocal {
		return ServiceLocal
	}
	return ServiceCluster
}

// Family is an IP version: 4 or 6.
type Family int

func (f Family) String() string { return fmt.Sprintf("IPv%d", int(f)) }

// FamilyOf returns a's family.
func FamilyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return 4
	}
	return 6
}

// Dual is one address per family.
type Dual struct{ V4, V6 netip.Addr }

// Get returns the address of family f.
func (d Dual) Get(f Family) netip.Addr {
	if f == 6 {
		return d.V6
	}
	return d.V4
}

// MustDual parses a pair of static addresses.
func MustDual(v4, v6 string) Dual {
	return Dual{netip.MustParseAddr(v4), netip.MustParseAddr(v6)}
}

// Addresses. Every address of the lab is a documentation address (RFC 5737,
// RFC 3849): the clients, the load balancer, the node network and the
// load-balancer addresses, and also the cluster IP and the pod network, and
// all exist only inside the lab's namespaces.
var (
	LBExternal = MustDual("192.0.2.1", "2001:db8:2::1")      // the load balancer on the client network
	LBInternal = MustDual("198.51.100.1", "2001:db8:100::1") // and on the node network: HAProxy connects from here

	// VIPPassthrough is DNATed by the L4 load balancer; HAProxy listens on the
	// other two, forwarding without and with a PROXY v2 header.
	VIPPassthrough = MustDual("203.0.113.10", "2001:db8:ffff::10")
	VIPHAProxy     = MustDual("203.0.113.20", "2001:db8:ffff::20")
	VIPHAProxyPP   = MustDual("203.0.113.30", "2001:db8:ffff::30")

	// The cluster IP and the pods also take documentation addresses: the
	// cluster IP beside the VIPs, and the pods the upper half of
	// 203.0.113.0/24, a /27 per node (and a /64 per node in 2001:db8:244::/48).
	ClusterIP = MustDual("203.0.113.40", "2001:db8:ffff::40")
	PodCIDR   = [2]netip.Prefix{netip.MustParsePrefix("203.0.113.128/25"), netip.MustParsePrefix("2001:db8:244::/48")}
)

// PodSubnetBits is the length of a node's IPv4 pod subnet (its IPv6 one is a
// /64).
const PodSubnetBits = 27

// podBase4 is node i's IPv4 pod subnet address (i from 1).
func podBase4(node int) int { return 128 + 32*(node-1) }

func PodCIDRFor(f Family) netip.Prefix {
	if f == 6 {
		return PodCIDR[1]
	}
	return PodCIDR[0]
}

// ClientAddr is external client i's address (i from 1): 192.0.2.1i.
func ClientAddr(i int) Dual {
	return MustDual(fmt.Sprintf("192.0.2.%d", 10+i), fmt.Sprintf("2001:db8:2::%d", 10+i))
}

// NodeAddr is node i's address on the node network (i from 1): 198.51.100.1i.
func NodeAddr(i int) Dual {
	return MustDual(fmt.Sprintf("198.51.100.%d", 10+i), fmt.Sprintf("2001:db8:100::%d", 10+i))
}

// PodGateway is node i's address towards its pods, on every pod veth: the
// first of its pod subnet (203.0.113.129 on n1, 2001:db8:244:1::1).
// Masquerading picks it when the endpoint is on the same node.
func PodGateway(i int) Dual {
	return MustDual(fmt.Sprintf("203.0.113.%d", podBase4(i)+1), fmt.Sprintf("2001:db8:244:%d::1", i))
}

// PodAddr is the address of pod k (from 0) on node i: the (10+k)th of its
// pod subnet (203.0.113.138 for n1's first pod, 2001:db8:244:1::10).
func PodAddr(node, k int) Dual {
	return MustDual(fmt.Sprintf("203.0.113.%d", podBase4(node)+10+k), fmt.Sprintf("2001:db8:244:%d::%d", node, 10+k))
}

func PodSubnet(node int) Dual {
	return MustDual(fmt.Sprintf("203.0.113.%d", podBase4(node)), fmt.Sprintf("2001:db8:244:%d::", node))
}

// Network is what the model needs to turn an Expectation into a clientip
// configuration: every address a masqueraded connection can come from (node
// IPs and their pod-side gateway addresses) and the address HAProxy connects
// from.
func Network() trafficpolicy.Network {
	var nodes []netip.Prefix
	for i := 1; i <= NumNodes; i++ {
		for _, d := range []Dual{NodeAddr(i), PodGateway(i)} {
			nodes = append(nodes, netip.PrefixFrom(d.V4, 32), netip.PrefixFrom(d.V6, 128))
		}
	}
	n, err := clientip.NewPrefixSet(nodes...)
	if err != nil {
		panic(err) // static addresses
	}
	lbs, err := clientip.NewPrefixSet(netip.PrefixFrom(LBInternal.V4, 32), netip.PrefixFrom(LBInternal.V6, 128))
	if err != nil {
		panic(err)
	}
	return trafficpolicy.Network{Nodes: n, LoadBalancers: lbs}
}
