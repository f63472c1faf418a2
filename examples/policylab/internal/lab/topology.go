package lab

import (
	"fmt"

	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
)

// topology draws the lab for the report.
func (l *Lab) topology() string {
	return fmt.Sprintf(`namespaces %[1]s<role>; "sw" holds the two bridges (plain switches, bridge netfilter off)

 c1 192.0.2.11 / 2001:db8:2::11 ──┐
 c2 192.0.2.12 / 2001:db8:2::12 ──┤ br-ext: 192.0.2.0/24, 2001:db8:2::/64
                                  │
                  ext 192.0.2.1 / 2001:db8:2::1
 ┌ lb ────────────────────────────────────────────────────────────────────┐
 │ L4 passthrough: DNAT 203.0.113.10:80, [2001:db8:ffff::10]:80           │
 │   → healthy nodes :%[2]d (-m statistic); members from the prober       │
 │ HAProxy 2.6, mode tcp: 203.0.113.20 plain, 203.0.113.30 send-proxy-v2  │
 │   (and 2001:db8:ffff::20, ::30) → nodes :%[2]d, option httpchk         │
 └────────────────────────────────────────────────────────────────────────┘
                  int 198.51.100.1 / 2001:db8:100::1
                                  │ br-int: 198.51.100.0/24, 2001:db8:100::/64
        ┌─────────────────────────┼─────────────────────────┐
 n1 198.51.100.11          n2 198.51.100.12          n3 198.51.100.13
  ├ n1-a 203.0.113.138      └ n2-a 203.0.113.170      └ n3-caller 203.0.113.202
  └ n1-b 203.0.113.139                                  (a pod, not an endpoint)

 Every node: kube-proxy (k8s.io/kubernetes v1.34.2, iptables or nftables mode, IPv4 and IPv6) for
 Service lab/echo: port 80 → pods :8080, nodePort %[2]d, cluster IP 203.0.113.40, the three load-balancer
 addresses as ingress IPs (ipMode VIP); its health check node port :%[3]d and its :%[4]d; beside them the
 project's trafficpolicy.HealthServer on :%[5]d and NodeHealthServer on :%[6]d; default route via the lb. Pods have IPv4 and IPv6 addresses (a /27 of 203.0.113.128/25 per node,
 2001:db8:244:N::/64), each a /32 (/128) route over its own veth; the node answers for the first
 address of its pod range (203.0.113.129 on n1) on every pod veth.
`, l.prefix, topo.NodePort, topo.HealthCheckNodePort, topo.ProxyHealthzPort, topo.OwnHealthPort, topo.OwnNodeHealthPort)
}
