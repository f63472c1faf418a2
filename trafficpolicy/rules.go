package trafficpolicy

import "github.com/sourceip/sourceip/clientip"

// The kube-proxy behaviour each answer rests on, after
// pkg/proxy/iptables/proxier.go (Kubernetes 1.24+ chain names; the nftables
// proxier implements the same semantics). <svc> stands for the Service port's
// chain hash.
const (
	ruleNotExposed = "no capture rule: the Service type opens no such path"

	ruleExtCluster = "KUBE-EXT-<svc>: -j KUBE-MARK-MASQ (\"masquerade traffic for external destinations\"), then -j KUBE-SVC-<svc> (all endpoints)"
	ruleExtLocal   = "KUBE-EXT-<svc>: -j KUBE-SVL-<svc> (node-local endpoints, no masquerade)"
	ruleExtDrop    = "filter KUBE-EXTERNAL-SERVICES: -j DROP (\"<svc> has no local endpoints\"), for the LB IP and the node port"

	ruleClusterIP     = "KUBE-SERVICES -d <clusterIP> -j KUBE-SVC-<svc>; masquerade only for sources outside the pod CIDR (! <IfLocal> -j KUBE-MARK-MASQ)"
	ruleClusterIPSVL  = "internalTrafficPolicy Local: KUBE-SERVICES -d <clusterIP> -j KUBE-SVL-<svc> (node-local endpoints, no masquerade)"
	ruleClusterIPDrop = "filter KUBE-SERVICES -d <clusterIP>: -j DROP (\"<svc> has no local endpoints\")"

	rulePodLBCluster = "KUBE-SERVICES -d <LB IP> -j KUBE-EXT-<svc> captures the VIP on the pod's node; KUBE-EXT: -j KUBE-MARK-MASQ, -j KUBE-SVC-<svc>"
	rulePodLBLocal   = "KUBE-SERVICES -d <LB IP> -j KUBE-EXT-<svc>; KUBE-EXT: <IfLocal> -j KUBE-SVC-<svc> (\"pod traffic for external destinations\": all endpoints, no masquerade, never dropped)"
	ruleIPModeProxy  = "ipMode Proxy: pkg/proxy/util IsVIPMode is false, so kube-proxy does not capture the LB IP and the connection goes out through the load balancer; then "

	ruleProxyExtCluster = ruleIPModeProxy + ruleExtCluster
	ruleProxyExtLocal   = ruleIPModeProxy + ruleExtLocal
	ruleProxyExtDrop    = ruleIPModeProxy + ruleExtDrop
)

// Expect answers a [Case]. It is a pure function of c, does not allocate, and
// has an answer for every combination, including paths a Service type does
// not open ([NotExposed]) and load balancers of unknown kind.
//
// The model is kube-proxy's iptables mode:
//
//   - externalTrafficPolicy Cluster masquerades node-port and load-balancer
//     traffic to the node and sends it to any endpoint; the client's address
//     survives only inside a PROXY header or X-Forwarded-For, which the
//     backend can then only believe by trusting the nodes.
//   - externalTrafficPolicy Local keeps the source and sends the traffic to
//     node-local endpoints only; a node without one drops it, and load
//     balancers avoid such nodes by probing healthCheckNodePort.
//   - Pods calling the cluster IP keep their address; internalTrafficPolicy
//     Local restricts them to their own node's endpoints and drops the
//     connection when there is none.
//   - Pods calling a VIP-mode load-balancer IP never reach the load
//     balancer: kube-proxy captures the IP on their node. Under Cluster the
//     connection is masqueraded; under Local it keeps the pod's address and,
//     unlike external traffic, may go to any endpoint and is never dropped.
//     Either way no PROXY header or X-Forwarded-For is added.
//   - With ipMode Proxy the load-balancer IP is not captured, so pods really
//     go through the load balancer and are treated like external clients.
//   - trafficDistribution narrows the endpoints chosen under a Cluster
//     policy; it changes no address.
func Expect(c Case) Expectation {
	switch c.Path {
	case PathLoadBalancer:
		if c.Type != TypeLoadBalancer {
			return notExposed(c)
		}
		return external(c, true)
	case PathNodePort:
		if !c.Type.externallyAccessible() {
			return notExposed(c)
		}
		return external(c, false)
	case PathClusterIP:
		return clusterIP(c)
	case PathPodToLoadBalancerIP:
		if c.Type != TypeLoadBalancer {
			return notExposed(c)
		}
		if c.IPMode == IPModeProxy {
			e := external(c, true)
			e.Caveats |= CaveatEgressSNAT
			switch e.Rule { // constants, so that Expect does not allocate
			case ruleExtCluster:
				e.Rule = ruleProxyExtCluster
			case ruleExtLocal:
				e.Rule = ruleProxyExtLocal
			case ruleExtDrop:
				e.Rule = ruleProxyExtDrop
			}
			return e
		}
		return podToVIP(c)
	}
	return notExposed(c)
}

func notExposed(c Case) Expectation {
	return Expectation{Case: c, Outcome: NotExposed, Rule: ruleNotExposed}
}

// clusterEndpoints is the endpoint set of a Cluster policy under c's
// trafficDistribution.
func clusterEndpoints(d TrafficDistribution) Endpoints {
	switch d {
	case PreferClose, PreferSameZone:
		return EndpointsPreferSameZone
	case PreferSameNode:
		return EndpointsPreferSameNode
	}
	return EndpointsCluster
}

// external answers traffic that enters a node through KUBE-EXT-<svc>: from a
// load balancer (viaLB) or straight to a node port.
func external(c Case, viaLB bool) Expectation {
	e := Expectation{Case: c, Outcome: Delivered}
	if viaLB {
		e.ProxyHeader = c.LB.sendsProxyHeader()
	}
	if c.External == ExternalCluster {
		e.Rule = ruleExtCluster
		e.Endpoints = clusterEndpoints(c.Distribution)
		e.Peer = PeerNode
		if !viaLB {
			return e
		}
		e.Health = HealthNodeProxy
		switch c.LB {
		case LBProxyProtocol, LBPassthroughProxyProtocol:
			e.Client = clientip.SourceProxyProtocol
			e.Trust = TrustNodes
			e.Caveats |= CaveatNodePortsOpen
		case LBXForwardedFor:
			e.Client = clientip.SourceXForwardedFor
			// The load balancer's addresses are trusted too, for load
			// balancers that append their own hop after the client's.
			e.Trust = TrustNodes | TrustLoadBalancers
			e.Header = "X-Forwarded-For"
			e.Caveats |= CaveatNodePortsOpen
		case LBUnknown:
			e.Caveats |= CaveatUnknownLB
		}
		return e
	}

	if viaLB {
		e.Health = HealthCheckNodePort
	}
	if !c.LocalEndpoint {
		e.Outcome = Dropped
		e.ProxyHeader = false
		e.Rule = ruleExtDrop
		return e
	}
	e.Rule = ruleExtLocal
	e.Endpoints = EndpointsLocal
	if !viaLB {
		e.Peer = PeerClient
		e.Client = clientip.SourceSocket
		return e
	}
	switch c.LB {
	case LBPassthrough:
		e.Peer = PeerClient
		e.Client = clientip.SourceSocket
	case LBProxyProtocol:
		e.Peer = PeerLoadBalancer
		e.Client = clientip.SourceProxyProtocol
		e.Trust = TrustLoadBalancers
	case LBXForwardedFor:
		e.Peer = PeerLoadBalancer
		e.Client = clientip.SourceXForwardedFor
		e.Trust = TrustLoadBalancers
		e.Header = "X-Forwarded-For"
	case LBFullProxy:
		e.Peer = PeerLoadBalancer
	case LBPassthroughProxyProtocol:
		// An IPv4 client is the socket peer, and its header, from an
		// address no recipe can trust, is discarded. An IPv6 client of a
		// dual-stack NLB arrives from the load balancer's IPv4 address
		// with the header naming it, which only trusting the load
		// balancers recovers.
		e.Peer = PeerClient
		e.Client = clientip.SourceSocket
		e.Trust = TrustLoadBalancers
		e.Caveats |= CaveatProxyHeaderFromClient
	default:
		e.Peer = PeerUnknown
		e.Caveats |= CaveatUnknownLB
	}
	return e
}

// clusterIP answers a pod calling the cluster IP.
func clusterIP(c Case) Expectation {
	if c.Type == TypeExternalName {
		return notExposed(c)
	}
	e := Expectation{Case: c, Outcome: Delivered, Health: HealthReadiness, Caveats: CaveatHairpin}
	if c.Internal == InternalLocal {
		if !c.LocalEndpoint {
			e.Outcome = Dropped
			e.Caveats = 0
			e.Rule = ruleClusterIPDrop
			return e
		}
		e.Endpoints = EndpointsLocal
		e.Rule = ruleClusterIPSVL
	} else {
		e.Endpoints = clusterEndpoints(c.Distribution)
		e.Rule = ruleClusterIP
	}
	e.Peer = PeerClient
	e.Client = clientip.SourceSocket
	return e
}

// podToVIP answers a pod calling a VIP-mode load-balancer IP, which
// kube-proxy captures on the pod's own node.
func podToVIP(c Case) Expectation {
	e := Expectation{Case: c, Outcome: Delivered, Health: HealthReadiness, Endpoints: clusterEndpoints(c.Distribution)}
	if c.LB.sendsProxyHeader() {
		if c.External == ExternalCluster {
			e.Caveats |= CaveatNoProxyHeaderFromNode
		} else {
			e.Caveats |= CaveatNoProxyHeader
		}
	}
	if c.External == ExternalCluster {
		e.Peer = PeerNode
		e.Rule = rulePodLBCluster
		return e
	}
	e.Peer = PeerClient
	e.Client = clientip.SourceSocket
	e.Rule = rulePodLBLocal
	return e
}
