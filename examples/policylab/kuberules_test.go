package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/sourceip/sourceip/trafficpolicy"
)

func testService(p trafficpolicy.ExternalTrafficPolicy, f family, eps ...kubeEndpoint) kubeService {
	return kubeService{
		Family:          f,
		External:        p,
		ClusterIP:       clusterIP.get(f),
		LoadBalancerIPs: []netip.Addr{vipPassthrough.v4, vipPassthrough.v6, vipHAProxyPP.v4, vipHAProxyPP.v6},
		PodCIDR:         podCIDRFor(f),
		Endpoints:       eps,
	}
}

func ready(node string, a netip.Addr) kubeEndpoint {
	return kubeEndpoint{Addr: a, Node: node, Ready: true, Serving: true}
}

func terminating(node string, a netip.Addr) kubeEndpoint {
	return kubeEndpoint{Addr: a, Node: node, Serving: true, Terminating: true}
}

// lines returns the rules of chain (prefix match, so "KUBE-SVL-" finds the
// Service's SVL chain) in the text's order.
func lines(text, chain string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "-A "+chain) {
			out = append(out, l)
		}
	}
	return out
}

func has(text, sub string) bool { return strings.Contains(text, sub) }

var (
	epA = podAddr(1, 0).v4
	epB = podAddr(1, 1).v4
	epC = podAddr(2, 0).v4
)

func TestKubeRulesCluster(t *testing.T) {
	text := kubeRules(testService(trafficpolicy.ExternalCluster, 4, ready("n1", epA), ready("n1", epB), ready("n2", epC)), "n3")
	ext := lines(text, "KUBE-EXT-")
	if len(ext) != 2 || !has(ext[0], "-j KUBE-MARK-MASQ") || !has(ext[1], "-j KUBE-SVC-") {
		t.Errorf("KUBE-EXT under Cluster = %q, want mark for masquerade then all endpoints", ext)
	}
	svc := lines(text, "KUBE-SVC-")
	if len(svc) != 4 { // the cluster IP's masquerade rule and three endpoints
		t.Fatalf("KUBE-SVC = %q", svc)
	}
	if !has(svc[0], "! -s 203.0.113.128/25") || !has(svc[0], "-d 203.0.113.40") {
		t.Errorf("first KUBE-SVC rule %q, want masquerade of cluster-IP traffic from outside the pod network", svc[0])
	}
	for i, p := range []string{"--probability 0.3333333333", "--probability 0.5000000000", ""} {
		if p != "" && !has(svc[i+1], p) || p == "" && has(svc[i+1], "statistic") {
			t.Errorf("KUBE-SVC rule %d = %q, want %q", i+1, svc[i+1], p)
		}
	}
	if has(text, "KUBE-SVL-") || has(text, "DROP") {
		t.Error("Cluster rules have a KUBE-SVL chain or a DROP")
	}
	if !has(text, "-A KUBE-SERVICES -d 203.0.113.10 -p tcp --dport 80") || !has(text, "-A KUBE-SERVICES -d 203.0.113.30 -p tcp --dport 80") {
		t.Error("load-balancer IPs are not captured")
	}
	if has(text, "2001:db8") {
		t.Error("IPv4 rules mention IPv6 addresses")
	}
	sep := lines(text, "KUBE-SEP-")
	if len(sep) != 6 {
		t.Fatalf("KUBE-SEP rules = %q, want hairpin masquerade and DNAT per endpoint", sep)
	}
	if !has(sep[0], "-s 203.0.113.138 ") || !has(sep[0], "KUBE-MARK-MASQ") || !has(sep[1], "DNAT --to-destination 203.0.113.138:8080") {
		t.Errorf("KUBE-SEP = %q", sep[:2])
	}
}

func TestKubeRulesLocal(t *testing.T) {
	svc := testService(trafficpolicy.ExternalLocal, 4, ready("n1", epA), ready("n1", epB), ready("n2", epC))

	t.Run("node with endpoints", func(t *testing.T) {
		text := kubeRules(svc, "n1")
		ext := lines(text, "KUBE-EXT-")
		want := []string{"-s 203.0.113.128/25", "--src-type LOCAL -j KUBE-MARK-MASQ", "--src-type LOCAL -j KUBE-SVC-", "-j KUBE-SVL-"}
		if len(ext) != len(want) {
			t.Fatalf("KUBE-EXT = %q", ext)
		}
		for i, w := range want {
			if !has(ext[i], w) {
				t.Errorf("KUBE-EXT rule %d = %q, want %q", i, ext[i], w)
			}
		}
		svl := lines(text, "KUBE-SVL-")
		if len(svl) != 2 || !has(svl[0], "203.0.113.138") || !has(svl[1], "203.0.113.139") {
			t.Errorf("KUBE-SVL = %q, want n1's two endpoints only", svl)
		}
		if has(text, "DROP") {
			t.Error("DROP on a node with local endpoints")
		}
		if !has(text, "--dport 32080") {
			t.Error("health check node port not accepted")
		}
	})

	t.Run("node without endpoints", func(t *testing.T) {
		text := kubeRules(svc, "n3")
		if has(text, "KUBE-SVL-") {
			t.Error("KUBE-SVL chain on a node without local endpoints")
		}
		drops := lines(text, "KUBE-EXTERNAL-SERVICES")
		want := []string{"-d 203.0.113.10 -p tcp --dport 80", "-d 203.0.113.30 -p tcp --dport 80", "--dst-type LOCAL -p tcp --dport 30080"}
		if len(drops) != len(want) {
			t.Fatalf("KUBE-EXTERNAL-SERVICES = %q", drops)
		}
		for i, w := range want {
			if !has(drops[i], w) || !has(drops[i], "-j DROP") {
				t.Errorf("drop rule %d = %q, want %q … -j DROP", i, drops[i], w)
			}
		}
		// Pods on this node still reach every endpoint (short-circuit).
		if ext := lines(text, "KUBE-EXT-"); len(ext) != 3 || !has(ext[0], "-s 203.0.113.128/25 ") {
			t.Errorf("KUBE-EXT = %q", ext)
		}
	})
}

func TestKubeRulesTerminatingFallback(t *testing.T) {
	// n2's only endpoint is terminating but serving: kube-proxy keeps using it
	// for n2's local traffic, while the cluster-wide set takes the ready ones.
	svc := testService(trafficpolicy.ExternalLocal, 4, ready("n1", epA), terminating("n2", epC))
	text := kubeRules(svc, "n2")
	if svl := lines(text, "KUBE-SVL-"); len(svl) != 1 || !has(svl[0], "203.0.113.170") {
		t.Errorf("KUBE-SVL = %q, want the terminating endpoint", svl)
	}
	if svc := lines(text, "KUBE-SVC-"); len(svc) != 2 || has(svc[1], "203.0.113.170") {
		t.Errorf("KUBE-SVC = %q, want the ready endpoint only", svc)
	}
	if has(text, "DROP") {
		t.Error("a node with a serving terminating endpoint drops")
	}
	// With no ready endpoint anywhere, the cluster-wide set falls back too.
	text = kubeRules(testService(trafficpolicy.ExternalCluster, 4, terminating("n2", epC)), "n1")
	if svc := lines(text, "KUBE-SVC-"); len(svc) != 2 || !has(svc[1], "203.0.113.170") {
		t.Errorf("KUBE-SVC = %q, want the terminating endpoint", svc)
	}
}

func TestKubeRulesNoEndpoints(t *testing.T) {
	text := kubeRules(testService(trafficpolicy.ExternalLocal, 4, kubeEndpoint{Addr: epA, Node: "n1"}), "n1") // not ready, not serving
	if has(text, "KUBE-SVC-") || has(text, "DNAT") {
		t.Error("nat chains for a Service without endpoints")
	}
	if len(lines(text, "KUBE-EXTERNAL-SERVICES")) != 3 || !has(text, "-j REJECT") {
		t.Errorf("rules:\n%s", text)
	}
}

func TestKubeRulesIPv6(t *testing.T) {
	text := kubeRules(testService(trafficpolicy.ExternalCluster, 6, ready("n1", podAddr(1, 0).v6)), "n1")
	for _, want := range []string{"-d 2001:db8:ffff::10 -p tcp", "-d 2001:db8:ffff::40", "! -s 2001:db8:244::/48", "--to-destination [2001:db8:244:1::10]:8080"} {
		if !has(text, want) {
			t.Errorf("IPv6 rules lack %q", want)
		}
	}
	if has(text, "203.0.113.") {
		t.Error("IPv6 rules mention IPv4 addresses")
	}
}

func TestChainNames(t *testing.T) {
	h := portProtoHash(svcPortName, "tcp")
	if len(h) != 16 || strings.Trim(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
		t.Errorf("portProtoHash = %q, want 16 base32 characters", h)
	}
	if sepChain(ready("n1", epA)) == sepChain(ready("n1", epB)) {
		t.Error("two endpoints share a KUBE-SEP chain")
	}
}

func TestLBRules(t *testing.T) {
	if text := lbRules(4, nil); has(text, "DNAT") || !has(text, "-d 203.0.113.10 -p tcp --dport 80 -m comment --comment \"no healthy node\" -j REJECT") {
		t.Errorf("no members:\n%s", text)
	}
	text := lbRules(4, []netip.Addr{nodeAddr(1).v4, nodeAddr(2).v4, nodeAddr(3).v4})
	r := lines(text, "LB-SERVICE")
	if len(r) != 3 || !has(r[0], "--probability 0.3333333333") || !has(r[1], "--probability 0.5000000000") || has(r[2], "statistic") {
		t.Errorf("three members: %q", r)
	}
	if !has(r[2], "--to-destination 198.51.100.13:30080") || has(text, "MASQUERADE") || has(text, "REJECT") {
		t.Errorf("three members:\n%s", text)
	}
	if text := lbRules(6, []netip.Addr{nodeAddr(1).v6}); !has(text, "-d 2001:db8:ffff::10 ") || !has(text, "--to-destination [2001:db8:100::11]:30080") {
		t.Errorf("IPv6:\n%s", text)
	}
}

func TestNamespaceNames(t *testing.T) {
	for name, want := range map[string]bool{
		runPrefix(123) + "n1":       true,
		runPrefix(123) + "n3caller": true,
		"plab-n1":                   false,
		"plabx12-n1":                false,
		"other123-n1":               false,
		runPrefix(123) + "N1":       false,
	} {
		if got := nsNameRE.MatchString(name); got != want {
			t.Errorf("nsNameRE.MatchString(%q) = %v, want %v", name, got, want)
		}
	}
}
