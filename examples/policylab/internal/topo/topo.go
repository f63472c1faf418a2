package main

import (
	"fmt"
	"net/netip"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// The lab's Service: one TCP port, exposed through a node port and three
// load-balancer addresses, with a healthCheckNodePort while its
// externalTrafficPolicy is Local.
const (
	svcNamespace = "lab"
	svcName      = "echo"
	svcPortName  = "lab/echo:http" // kube-proxy's ServicePortName, which its chain hashes are made of

	servicePort         = 80
	targetPort          = 8080
	nodePort            = 30080
	healthCheckNodePort = 32080
	proxyHealthzPort    = 10256 // kube-proxy's own /healthz, probed by load balancers under Cluster

	numNodes   = 3
	numClients = 2
)

// family is an IP version: 4 or 6.
type family int

func (f family) String() string { return fmt.Sprintf("IPv%d", int(f)) }

func familyOf(a netip.Addr) family {
	if a.Unmap().Is4() {
		return 4
	}
	return 6
}

// dual is one address per family.
type dual struct{ v4, v6 netip.Addr }

func (d dual) get(f family) netip.Addr {
	if f == 6 {
		return d.v6
	}
	return d.v4
}

func mustDual(v4, v6 string) dual {
	return dual{netip.MustParseAddr(v4), netip.MustParseAddr(v6)}
}

// Addresses. "External" hosts (clients, the load balancer, the node network
// and the load-balancer addresses) use documentation ranges (RFC 5737,
// RFC 3849); the pod network and the cluster IP use the ranges a kubeadm
// cluster would, and exist only inside the lab's namespaces.
var (
	lbExternal = mustDual("192.0.2.1", "2001:db8:2::1")      // the load balancer on the client network
	lbInternal = mustDual("198.51.100.1", "2001:db8:100::1") // and on the node network: HAProxy connects from here

	// vipPassthrough is DNATed by the L4 load balancer; HAProxy listens on the
	// other two, forwarding without and with a PROXY v2 header.
	vipPassthrough = mustDual("203.0.113.10", "2001:db8:ffff::10")
	vipHAProxy     = mustDual("203.0.113.20", "2001:db8:ffff::20")
	vipHAProxyPP   = mustDual("203.0.113.30", "2001:db8:ffff::30")

	// The cluster IP and the pods also take documentation addresses: the
	// cluster IP beside the VIPs, and the pods the upper half of
	// 203.0.113.0/24, a /27 per node (and a /64 per node in 2001:db8:244::/48).
	clusterIP = mustDual("203.0.113.40", "2001:db8:ffff::40")
	podCIDR   = [2]netip.Prefix{netip.MustParsePrefix("203.0.113.128/25"), netip.MustParsePrefix("2001:db8:244::/48")}
)

// podSubnetBits is the length of a node's IPv4 pod subnet (its IPv6 one is a
// /64).
const podSubnetBits = 27

// podBase4 is node i's IPv4 pod subnet address (i from 1).
func podBase4(node int) int { return 128 + 32*(node-1) }

func podCIDRFor(f family) netip.Prefix {
	if f == 6 {
		return podCIDR[1]
	}
	return podCIDR[0]
}

// clientAddr is external client i's address (i from 1): 192.0.2.1i.
func clientAddr(i int) dual {
	return mustDual(fmt.Sprintf("192.0.2.%d", 10+i), fmt.Sprintf("2001:db8:2::%d", 10+i))
}

// nodeAddr is node i's address on the node network (i from 1): 198.51.100.1i.
func nodeAddr(i int) dual {
	return mustDual(fmt.Sprintf("198.51.100.%d", 10+i), fmt.Sprintf("2001:db8:100::%d", 10+i))
}

// podGateway is node i's address towards its pods, on every pod veth: the
// first of its pod subnet (203.0.113.129 on n1, 2001:db8:244:1::1).
// Masquerading picks it when the endpoint is on the same node.
func podGateway(i int) dual {
	return mustDual(fmt.Sprintf("203.0.113.%d", podBase4(i)+1), fmt.Sprintf("2001:db8:244:%d::1", i))
}

// podAddr is the address of pod k (from 0) on node i: the (10+k)th of its
// pod subnet (203.0.113.138 for n1's first pod, 2001:db8:244:1::10).
func podAddr(node, k int) dual {
	return mustDual(fmt.Sprintf("203.0.113.%d", podBase4(node)+10+k), fmt.Sprintf("2001:db8:244:%d::%d", node, 10+k))
}

func podSubnet(node int) dual {
	return mustDual(fmt.Sprintf("203.0.113.%d", podBase4(node)), fmt.Sprintf("2001:db8:244:%d::", node))
}

// labNetwork is what the model needs to turn an Expectation into a clientip
// configuration: every address a masqueraded connection can come from (node
// IPs and their pod-side gateway addresses) and the address HAProxy connects
// from.
func labNetwork() trafficpolicy.Network {
	var nodes []netip.Prefix
	for i := 1; i <= numNodes; i++ {
		for _, d := range []dual{nodeAddr(i), podGateway(i)} {
			nodes = append(nodes, netip.PrefixFrom(d.v4, 32), netip.PrefixFrom(d.v6, 128))
		}
	}
	n, err := clientip.NewPrefixSet(nodes...)
	if err != nil {
		panic(err) // static addresses
	}
	lbs, err := clientip.NewPrefixSet(netip.PrefixFrom(lbInternal.v4, 32), netip.PrefixFrom(lbInternal.v6, 128))
	if err != nil {
		panic(err)
	}
	return trafficpolicy.Network{Nodes: n, LoadBalancers: lbs}
}
