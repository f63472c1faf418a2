package main

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/trafficpolicy"
)

// kubeService is what one node's kube-proxy knows about the lab's Service in
// one IP family.
type kubeService struct {
	Family          family
	External        trafficpolicy.ExternalTrafficPolicy
	ClusterIP       netip.Addr
	LoadBalancerIPs []netip.Addr // status.loadBalancer.ingress, all ipMode VIP
	PodCIDR         netip.Prefix // --cluster-cidr, kube-proxy's local-traffic detector
	Endpoints       []kubeEndpoint
}

// kubeEndpoint is one endpoint as an EndpointSlice reports it.
type kubeEndpoint struct {
	Addr        netip.Addr
	Node        string
	Ready       bool
	Serving     bool
	Terminating bool
}

// kubeRules returns the iptables-restore input with which kube-proxy's
// iptables mode (pkg/proxy/iptables/proxier.go, Kubernetes 1.24+ chain
// layout) would program node for s: the nat table (KUBE-SERVICES,
// KUBE-NODEPORTS, KUBE-EXT, KUBE-SVC, KUBE-SVL, KUBE-SEP, KUBE-MARK-MASQ,
// KUBE-POSTROUTING) and the filter table (KUBE-EXTERNAL-SERVICES dropping
// external traffic on a Local node without endpoints, KUBE-NODEPORTS
// accepting the health check node port).
//
// Endpoints are picked as pkg/proxy/topology.go CategorizeEndpoints does:
// ready ones, or when there are none, serving terminating ones, separately for
// the cluster-wide and the node-local set.
func kubeRules(s kubeService, node string) string {
	svc := "KUBE-SVC-" + portProtoHash(svcPortName, "tcp")
	svl := "KUBE-SVL-" + portProtoHash(svcPortName, "tcp")
	ext := "KUBE-EXT-" + portProtoHash(svcPortName, "tcp")
	comment := func(c string) string { return fmt.Sprintf(`-m comment --comment "%s"`, c) }
	name := svcNamespace + "/" + svcName + ":http"

	var cluster, local []kubeEndpoint
	cluster = usable(s.Endpoints, func(kubeEndpoint) bool { return true })
	local = usable(s.Endpoints, func(e kubeEndpoint) bool { return e.Node == node })

	var nat, filter []string
	chains := []string{"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"}
	nat = append(nat,
		"-A PREROUTING "+comment("kubernetes service portals")+" -j KUBE-SERVICES",
		"-A OUTPUT "+comment("kubernetes service portals")+" -j KUBE-SERVICES",
		"-A POSTROUTING "+comment("kubernetes postrouting rules")+" -j KUBE-POSTROUTING",
		"-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000",
		"-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
		"-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000",
		"-A KUBE-POSTROUTING "+comment("kubernetes service traffic requiring SNAT")+" -j MASQUERADE",
	)
	filter = append(filter,
		"-A INPUT -m conntrack --ctstate NEW "+comment("kubernetes externally-visible service portals")+" -j KUBE-EXTERNAL-SERVICES",
		"-A FORWARD -m conntrack --ctstate NEW "+comment("kubernetes externally-visible service portals")+" -j KUBE-EXTERNAL-SERVICES",
		"-A INPUT "+comment("kubernetes health check service ports")+" -j KUBE-NODEPORTS",
	)
	filterChains := []string{"KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS"}

	vips := make([]netip.Addr, 0, len(s.LoadBalancerIPs))
	for _, a := range s.LoadBalancerIPs {
		if familyOf(a) == s.Family {
			vips = append(vips, a)
		}
	}

	if len(cluster) == 0 {
		// No endpoints at all: no nat chains; reject in filter.
		filter = append(filter, fmt.Sprintf("-A KUBE-EXTERNAL-SERVICES -p tcp -m addrtype --dst-type LOCAL --dport %d %s -j REJECT", nodePort, comment(name+" has no endpoints")))
		for _, v := range vips {
			filter = append(filter, fmt.Sprintf("-A KUBE-EXTERNAL-SERVICES -d %s -p tcp --dport %d %s -j REJECT", v, servicePort, comment(name+" has no endpoints")))
		}
		nat = append(nat, "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS")
		return restoreText(chains, nat, filterChains, filter)
	}

	chains = append(chains, svc, ext)
	// Cluster IP: masquerade sources outside the pod network.
	nat = append(nat,
		fmt.Sprintf("-A KUBE-SERVICES -d %s -p tcp --dport %d %s -j %s", s.ClusterIP, servicePort, comment(name+" cluster IP"), svc),
		fmt.Sprintf("-A %s -d %s -p tcp --dport %d ! -s %s %s -j KUBE-MARK-MASQ", svc, s.ClusterIP, servicePort, s.PodCIDR, comment(name+" cluster IP")),
	)
	for _, v := range vips {
		nat = append(nat, fmt.Sprintf("-A KUBE-SERVICES -d %s -p tcp --dport %d %s -j %s", v, servicePort, comment(name+" loadbalancer IP"), ext))
	}
	nat = append(nat,
		"-A KUBE-SERVICES "+comment("kubernetes service nodeports; NOTE: this must be the last rule in this chain")+" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS",
		fmt.Sprintf("-A KUBE-NODEPORTS -p tcp --dport %d %s -j %s", nodePort, comment(name), ext),
	)

	if s.External == trafficpolicy.ExternalCluster {
		nat = append(nat,
			fmt.Sprintf("-A %s %s -j KUBE-MARK-MASQ", ext, comment("masquerade traffic for "+name+" external destinations")),
			fmt.Sprintf("-A %s -j %s", ext, svc),
		)
	} else {
		filter = append(filter, fmt.Sprintf("-A KUBE-NODEPORTS -p tcp --dport %d %s -j ACCEPT", healthCheckNodePort, comment(name+" health check node port")))
		nat = append(nat,
			fmt.Sprintf("-A %s -s %s %s -j %s", ext, s.PodCIDR, comment("pod traffic for "+name+" external destinations"), svc),
			fmt.Sprintf("-A %s %s -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ", ext, comment("masquerade LOCAL traffic for "+name+" external destinations")),
			fmt.Sprintf("-A %s %s -m addrtype --src-type LOCAL -j %s", ext, comment("route LOCAL traffic for "+name+" external destinations"), svc),
		)
		if len(local) > 0 {
			chains = append(chains, svl)
			nat = append(nat, fmt.Sprintf("-A %s -j %s", ext, svl))
			nat = append(nat, spread(svl, local)...)
		} else {
			for _, v := range vips {
				filter = append(filter, fmt.Sprintf("-A KUBE-EXTERNAL-SERVICES -d %s -p tcp --dport %d %s -j DROP", v, servicePort, comment(name+" has no local endpoints")))
			}
			filter = append(filter, fmt.Sprintf("-A KUBE-EXTERNAL-SERVICES -m addrtype --dst-type LOCAL -p tcp --dport %d %s -j DROP", nodePort, comment(name+" has no local endpoints")))
		}
	}
	nat = append(nat, spread(svc, cluster)...)

	seen := make(map[string]bool)
	for _, e := range append(append([]kubeEndpoint(nil), cluster...), local...) {
		sep := sepChain(e)
		if seen[sep] {
			continue
		}
		seen[sep] = true
		chains = append(chains, sep)
		ep := netip.AddrPortFrom(e.Addr, targetPort)
		nat = append(nat,
			fmt.Sprintf("-A %s -s %s %s -j KUBE-MARK-MASQ", sep, e.Addr, comment(name)),
			fmt.Sprintf("-A %s -p tcp %s -j DNAT --to-destination %s", sep, comment(name), ep),
		)
	}
	return restoreText(chains, nat, filterChains, filter)
}

// usable returns the endpoints of eps that pass keep and that kube-proxy
// would use: the ready ones, or if there are none, the serving terminating
// ones.
func usable(eps []kubeEndpoint, keep func(kubeEndpoint) bool) []kubeEndpoint {
	var ready, terminating []kubeEndpoint
	for _, e := range eps {
		if !keep(e) {
			continue
		}
		switch {
		case e.Ready:
			ready = append(ready, e)
		case e.Serving && e.Terminating:
			terminating = append(terminating, e)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

// spread returns the rules of a KUBE-SVC or KUBE-SVL chain: one jump per
// endpoint, with -m statistic probabilities 1/n, 1/(n-1), …, and the last
// unconditional, so each endpoint gets an equal share.
func spread(chain string, eps []kubeEndpoint) []string {
	out := make([]string, 0, len(eps))
	for i, e := range eps {
		rule := fmt.Sprintf("-A %s -m comment --comment \"%s -> %s\"", chain, svcPortName, netip.AddrPortFrom(e.Addr, targetPort))
		if n := len(eps) - i; n > 1 {
			rule += fmt.Sprintf(" -m statistic --mode random --probability %0.10f", 1/float64(n))
		}
		out = append(out, rule+" -j "+sepChain(e))
	}
	return out
}

func sepChain(e kubeEndpoint) string {
	return "KUBE-SEP-" + portProtoHash(svcPortName, "tcp"+netip.AddrPortFrom(e.Addr, targetPort).String())
}

// portProtoHash is kube-proxy's chain-name hash: the first 16 characters of
// the base32 SHA-256 of the service port name and protocol.
func portProtoHash(name, proto string) string {
	h := sha256.Sum256([]byte(name + proto))
	return base32.StdEncoding.EncodeToString(h[:])[:16]
}

func restoreText(natChains, nat, filterChains, filter []string) string {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	for _, c := range natChains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, r := range nat {
		b.WriteString(r + "\n")
	}
	b.WriteString("COMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, c := range filterChains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, r := range filter {
		b.WriteString(r + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}
