package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sourceip/sourceip/trafficpolicy"
)

// Options configure a lab run.
type Options struct {
	// Timing is the health checking of both load balancers: the prober's
	// interval, timeout, rise and fall, and HAProxy's inter, timeout check,
	// rise and fall.
	Timing trafficpolicy.Timing

	// Conns is the number of connections per scenario row; SkewConns the
	// number for the skew measurement.
	Conns, SkewConns int

	// IPv6 adds IPv6 clients where the kernel path allows.
	IPv6 bool

	// Dir holds HAProxy's configuration; "" means a temporary directory that
	// is removed at the end.
	Dir string

	// Logf, when set, reports progress.
	Logf func(format string, args ...any)
}

// maxConns bounds Conns and SkewConns: every load loop of the lab is bounded.
const maxConns = 10000

// validate reports options the lab cannot run with.
func (o Options) validate() error {
	switch {
	case o.Conns < 1 || o.Conns > maxConns:
		return fmt.Errorf("conns %d is outside 1..%d", o.Conns, maxConns)
	case o.SkewConns < 1 || o.SkewConns > maxConns:
		return fmt.Errorf("skew-conns %d is outside 1..%d", o.SkewConns, maxConns)
	case o.Timing.Rise < 1 || o.Timing.Fall < 1:
		return fmt.Errorf("rise %d and fall %d must be at least 1", o.Timing.Rise, o.Timing.Fall)
	case o.Timing.Interval <= 0 || o.Timing.Timeout < 0 || o.Timing.Timeout > o.Timing.Interval:
		return fmt.Errorf("interval %v must be positive and timeout %v at most the interval", o.Timing.Interval, o.Timing.Timeout)
	}
	return nil
}

// DefaultOptions are the options of go run ./policylab and the test: probes
// every 250 ms, each given the whole interval to answer (the machine may be
// busy), out after 3 failures, in after 2 successes.
func DefaultOptions() Options {
	return Options{
		Timing:    trafficpolicy.Timing{Interval: 250 * time.Millisecond, Timeout: 250 * time.Millisecond, Rise: 2, Fall: 3},
		Conns:     24,
		SkewConns: 300,
		IPv6:      true,
	}
}

// host is a namespace with one address per family.
type host struct {
	name string
	ns   netns
	addr dual
}

// node is a Kubernetes node: kube-proxy's rules, the Service's health server
// on healthCheckNodePort and kube-proxy's own healthz, and its pods.
type node struct {
	host
	index    int
	registry *trafficpolicy.Registry
	health   *trafficpolicy.HealthServer
	servers  []*http.Server
}

// Lab is one run: the namespaces it created, the servers it runs in them,
// and the Service's state that the nodes' rules and health servers follow.
type Lab struct {
	opt    Options
	prefix string
	dir    string
	ipv6   bool
	net    trafficpolicy.Network

	created []netns // namespaces, for cleanup

	sw      host // the two bridges: client network and node network
	lb      host
	clients []*host
	nodes   []*node
	pods    []*pod // endpoints of the Service
	caller  *pod   // a pod that is not an endpoint, for in-cluster calls

	policy  trafficpolicy.ExternalTrafficPolicy
	pass    *passthroughLB
	haproxy *haproxyProc
}

func (l *Lab) logf(format string, args ...any) {
	if l.opt.Logf != nil {
		l.opt.Logf(format, args...)
	}
}

func (l *Lab) families() []family {
	if l.ipv6 {
		return []family{4, 6}
	}
	return []family{4}
}

func (l *Lab) node(name string) *node {
	for _, n := range l.nodes {
		if n.name == name {
			return n
		}
	}
	panic("no node " + name)
}

func (l *Lab) pod(name string) *pod {
	for _, p := range l.pods {
		if p.name == name {
			return p
		}
	}
	panic("no pod " + name)
}

func (l *Lab) newNS(role string) netns {
	ns := netns(l.prefix + role)
	l.created = append(l.created, ns)
	return ns
}

// layout is which pods run on which node: two on n1, one on n2, none on n3,
// the skew the guidance warns about, and a node without endpoints for the
// Local policy to steer around.
var layout = []struct {
	node int
	pods []string
}{
	{1, []string{"n1-a", "n1-b"}},
	{2, []string{"n2-a"}},
	{3, nil},
}

// setup creates the namespaces, links, addresses and routes, and starts the
// nodes' and pods' servers. On error the caller still calls cleanup.
func (l *Lab) setup(ctx context.Context) error {
	l.prefix = runPrefix(os.Getpid())
	l.net = labNetwork()
	if stale, err := sweepStale(ctx); err != nil {
		return fmt.Errorf("removing stale namespaces: %w", err)
	} else if len(stale) > 0 {
		l.logf("removed %d stale namespaces of dead runs: %s", len(stale), strings.Join(stale, " "))
	}

	l.sw = host{name: "sw", ns: l.newNS("sw")}
	l.lb = host{name: "lb", ns: l.newNS("lb"), addr: lbExternal}
	for i := 1; i <= numClients; i++ {
		l.clients = append(l.clients, &host{name: fmt.Sprintf("c%d", i), ns: l.newNS(fmt.Sprintf("c%d", i)), addr: clientAddr(i)})
	}
	for _, ly := range layout {
		n := &node{host: host{name: fmt.Sprintf("n%d", ly.node), ns: l.newNS(fmt.Sprintf("n%d", ly.node)), addr: nodeAddr(ly.node)}, index: ly.node, registry: new(trafficpolicy.Registry)}
		l.nodes = append(l.nodes, n)
		for k, name := range ly.pods {
			l.pods = append(l.pods, &pod{name: name, ns: l.newNS(strings.ReplaceAll(name, "-", "")), node: n, addr: podAddr(ly.node, k)})
		}
	}
	// The in-cluster caller runs on n3, which has no endpoint.
	l.caller = &pod{name: "n3-caller", ns: l.newNS("n3caller"), node: l.nodes[2], addr: podAddr(3, 0)}

	var add []string
	for _, ns := range l.created {
		add = append(add, "netns add "+string(ns))
	}
	if err := ipBatch(ctx, "", add); err != nil {
		return err
	}
	routers := map[netns]bool{l.lb.ns: true}
	for _, n := range l.nodes {
		routers[n.ns] = true
	}
	for _, ns := range l.created {
		kv := []string{
			"net.ipv4.conf.all.rp_filter", "0", "net.ipv4.conf.default.rp_filter", "0",
			"net.ipv6.conf.all.accept_dad", "0", "net.ipv6.conf.default.accept_dad", "0",
		}
		if ns == l.sw.ns {
			kv = append(kv, "net.bridge.bridge-nf-call-iptables", "0", "net.bridge.bridge-nf-call-ip6tables", "0", "net.bridge.bridge-nf-call-arptables", "0")
		}
		if routers[ns] {
			kv = append(kv, "net.ipv4.ip_forward", "1", "net.ipv6.conf.all.forwarding", "1")
		}
		if err := ns.sysctl(kv...); err != nil {
			return err
		}
	}
	if err := l.wire(ctx); err != nil {
		return err
	}
	for _, n := range l.nodes {
		if err := l.startNodeServers(n); err != nil {
			return err
		}
	}
	return nil
}

// wire creates the links. The switch namespace holds two bridges, br-ext
// (clients and the load balancer's outside) and br-int (the load balancer's
// inside and the nodes), with bridge netfilter off so it is a plain switch.
// Each pod has a veth to its node, routed like Calico's: the pod owns a /32
// (/128), the node answers for its gateway address on every pod veth.
func (l *Lab) wire(ctx context.Context) error {
	sw := string(l.sw.ns)
	pfx := func(a netip.Addr, bits int) string { return netip.PrefixFrom(a, bits).String() }
	batches := map[netns][]string{}
	swLines := []string{
		"link add name br-ext type bridge mcast_snooping 0", "link set dev br-ext up",
		"link add name br-int type bridge mcast_snooping 0", "link set dev br-int up",
	}
	attach := func(ns netns, ifname, swName, bridge string) {
		batches[ns] = append(batches[ns], fmt.Sprintf("link add name %s type veth peer name %s netns %s", ifname, swName, sw))
		swLines = append(swLines, fmt.Sprintf("link set dev %s master %s", swName, bridge), fmt.Sprintf("link set dev %s up", swName))
	}
	addrs := func(ns netns, ifname string, lines ...string) {
		for _, s := range lines {
			batches[ns] = append(batches[ns], fmt.Sprintf("addr add %s dev %s nodad", s, ifname))
		}
	}
	// Load balancer.
	lb := l.lb.ns
	batches[lb] = append(batches[lb], "link set dev lo up")
	attach(lb, "ext", "lbx", "br-ext")
	attach(lb, "int", "lbi", "br-int")
	addrs(lb, "ext", pfx(lbExternal.v4, 24), pfx(lbExternal.v6, 64))
	addrs(lb, "int", pfx(lbInternal.v4, 24), pfx(lbInternal.v6, 64))
	for _, v := range []dual{vipHAProxy, vipHAProxyPP} {
		addrs(lb, "lo", pfx(v.v4, 32), pfx(v.v6, 128))
	}
	batches[lb] = append(batches[lb], "link set dev ext up", "link set dev int up")
	// Clients.
	for _, c := range l.clients {
		batches[c.ns] = append(batches[c.ns], "link set dev lo up")
		attach(c.ns, "eth0", c.name, "br-ext")
		addrs(c.ns, "eth0", pfx(c.addr.v4, 24), pfx(c.addr.v6, 64))
		batches[c.ns] = append(batches[c.ns], "link set dev eth0 up",
			"route add default via "+lbExternal.v4.String(), "route add ::/0 via "+lbExternal.v6.String())
	}
	// Nodes and pods.
	podsOf := func(n *node) []*pod {
		var out []*pod
		for _, p := range append(slices.Clone(l.pods), l.caller) {
			if p.node == n {
				out = append(out, p)
			}
		}
		return out
	}
	for _, n := range l.nodes {
		batches[n.ns] = append(batches[n.ns], "link set dev lo up")
		attach(n.ns, "eth0", n.name, "br-int")
		addrs(n.ns, "eth0", pfx(n.addr.v4, 24), pfx(n.addr.v6, 64))
		batches[n.ns] = append(batches[n.ns], "link set dev eth0 up",
			"route add default via "+lbInternal.v4.String(), "route add ::/0 via "+lbInternal.v6.String())
		for _, o := range l.nodes {
			if o != n {
				sub := podSubnet(o.index)
				batches[n.ns] = append(batches[n.ns],
					fmt.Sprintf("route add %s via %s", pfx(sub.v4, podSubnetBits), o.addr.v4),
					fmt.Sprintf("route add %s via %s", pfx(sub.v6, 64), o.addr.v6))
			}
		}
		gw := podGateway(n.index)
		for i, p := range podsOf(n) {
			veth := fmt.Sprintf("p%d", i)
			batches[n.ns] = append(batches[n.ns], fmt.Sprintf("link add name %s type veth peer name eth0 netns %s", veth, p.ns))
			addrs(n.ns, veth, pfx(gw.v4, 32), pfx(gw.v6, 128))
			batches[n.ns] = append(batches[n.ns], "link set dev "+veth+" up",
				fmt.Sprintf("route add %s dev %s", pfx(p.addr.v4, 32), veth),
				fmt.Sprintf("route add %s dev %s", pfx(p.addr.v6, 128), veth))
			batches[p.ns] = append(batches[p.ns], "link set dev lo up")
			addrs(p.ns, "eth0", pfx(p.addr.v4, 32), pfx(p.addr.v6, 128))
			batches[p.ns] = append(batches[p.ns], "link set dev eth0 up",
				fmt.Sprintf("route add %s dev eth0", pfx(gw.v4, 32)),
				fmt.Sprintf("route add default via %s dev eth0", gw.v4),
				fmt.Sprintf("route add %s dev eth0", pfx(gw.v6, 128)),
				fmt.Sprintf("route add ::/0 via %s dev eth0", gw.v6))
		}
	}
	// Links first (each veth from the namespace that is not the switch, and
	// from the node for pods), then the switch's ports, then everything else
	// in parallel.
	order := []netns{lb}
	for _, c := range l.clients {
		order = append(order, c.ns)
	}
	for _, n := range l.nodes {
		order = append(order, n.ns)
	}
	create := func(ns netns) []string {
		var out []string
		for _, s := range batches[ns] {
			if strings.HasPrefix(s, "link add") {
				out = append(out, s)
			}
		}
		return out
	}
	for _, ns := range order {
		if err := ipBatch(ctx, ns, create(ns)); err != nil {
			return err
		}
		batches[ns] = slices.DeleteFunc(batches[ns], func(s string) bool { return strings.HasPrefix(s, "link add") })
	}
	if err := ipBatch(ctx, l.sw.ns, swLines); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(l.created))
	for i, ns := range l.created {
		wg.Go(func() { errs[i] = ipBatch(ctx, ns, batches[ns]) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startNodeServers starts node n's health servers: the Service's
// healthCheckNodePort (a trafficpolicy HealthServer fed by the node's
// registry) and kube-proxy's own /healthz on 10256, which load balancers
// probe under Cluster. Both listen on every address of the node's namespace.
func (l *Lab) startNodeServers(n *node) error {
	hs, err := trafficpolicy.NewHealthServer(trafficpolicy.HealthConfig{Namespace: svcNamespace, Name: svcName, Endpoints: n.registry})
	if err != nil {
		return err
	}
	n.health = hs
	proxyHealthz := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.URL.Path != "/livez" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		now := time.Now().UTC().Format(time.RFC3339Nano)
		fmt.Fprintf(w, `{"lastUpdated":%q,"currentTime":%q,"nodeEligible":true,"healthy":true}`, now, now)
	})
	for port, h := range map[int]http.Handler{healthCheckNodePort: hs, proxyHealthzPort: proxyHealthz} {
		var ln net.Listener
		if err := n.ns.do(func() error {
			var err error
			ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
			return err
		}); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second}
		n.servers = append(n.servers, srv)
		go srv.Serve(ln)
	}
	return nil
}

// kubeState returns what kube-proxy knows about the Service in family f.
func (l *Lab) kubeState(f family) kubeService {
	s := kubeService{
		Family:          f,
		External:        l.policy,
		ClusterIP:       clusterIP.get(f),
		LoadBalancerIPs: []netip.Addr{vipPassthrough.get(f), vipHAProxy.get(f), vipHAProxyPP.get(f)},
		PodCIDR:         podCIDRFor(f),
	}
	for _, p := range l.pods {
		switch p.state {
		case podReady:
			s.Endpoints = append(s.Endpoints, kubeEndpoint{Addr: p.addr.get(f), Node: p.node.name, Ready: true, Serving: true})
		case podTerminating:
			s.Endpoints = append(s.Endpoints, kubeEndpoint{Addr: p.addr.get(f), Node: p.node.name, Serving: true, Terminating: true})
		}
	}
	return s
}

// syncNode is one kube-proxy sync on n: its rules in every family, then its
// health server's endpoints (kube-proxy updates both in one sync). Only the
// IPv4 endpoints are counted, as kube-proxy's primary family's health server
// does (kubernetes#114702: a dual-stack node serves one family's count).
func (l *Lab) syncNode(ctx context.Context, n *node) error {
	for _, f := range l.families() {
		if err := n.ns.restore(ctx, f, kubeRules(l.kubeState(f), n.name)); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	for _, p := range l.pods {
		if p.node != n {
			continue
		}
		ep := netip.AddrPortFrom(p.addr.v4, targetPort)
		switch p.state {
		case podReady:
			n.registry.Set(ep, trafficpolicy.EndpointReady)
		case podTerminating:
			n.registry.Set(ep, trafficpolicy.EndpointTerminating)
		case podGone:
			n.registry.Remove(ep)
		}
	}
	return nil
}

// syncAll syncs every node, in parallel.
func (l *Lab) syncAll(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(l.nodes))
	for i, n := range l.nodes {
		wg.Go(func() { errs[i] = l.syncNode(ctx, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// nodesWithEndpoints returns the names of the nodes with a ready endpoint.
func (l *Lab) nodesWithEndpoints() []string {
	var out []string
	for _, n := range l.nodes {
		for _, p := range l.pods {
			if p.node == n && p.state == podReady {
				out = append(out, n.name)
				break
			}
		}
	}
	return out
}

func (l *Lab) nodeNames() []string {
	var out []string
	for _, n := range l.nodes {
		out = append(out, n.name)
	}
	return out
}

// cleanup stops everything the lab started and deletes its namespaces, which
// takes every veth and bridge with it. It uses its own context so that it
// also runs after the lab's was cancelled.
func (l *Lab) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l.pass.stop()
	l.haproxy.stop()
	for _, p := range append(slices.Clone(l.pods), l.caller) {
		if p != nil {
			p.close()
		}
	}
	for _, n := range l.nodes {
		for _, s := range n.servers {
			s.Close()
		}
	}
	var names []string
	for _, ns := range l.created {
		if _, err := os.Stat(ns.path()); err == nil {
			names = append(names, string(ns))
		}
	}
	err := deleteNamespaces(ctx, names)
	if l.dir != "" && l.opt.Dir == "" {
		os.RemoveAll(l.dir)
	}
	left, lerr := labNamespaces(ctx)
	for name, pid := range left {
		if pid == os.Getpid() {
			err = errors.Join(err, fmt.Errorf("namespace %s left behind", name))
		}
	}
	return errors.Join(err, lerr)
}

// settle waits until every link of the lab carries traffic in every family:
// each pair of neighbours exchanges a TCP SYN and its RST (port 1, nothing
// listens), so neighbour discovery is done before anything is measured. Right
// after the links come up, the first IPv6 neighbour solicitation on a link can
// go unanswered, and the kernel retries only after retrans_time (1 s), which
// would show up as a dropped connection in the first scenario.
func (l *Lab) settle(ctx context.Context) error {
	type pair struct {
		from netns
		to   dual
	}
	var pairs []pair
	for _, c := range l.clients {
		pairs = append(pairs, pair{c.ns, lbExternal})
	}
	for _, n := range l.nodes {
		pairs = append(pairs, pair{l.lb.ns, n.addr}, pair{n.ns, lbInternal})
		for _, o := range l.nodes {
			if o != n {
				pairs = append(pairs, pair{n.ns, o.addr})
			}
		}
	}
	for _, p := range append(slices.Clone(l.pods), l.caller) {
		pairs = append(pairs, pair{p.ns, podGateway(p.node.index)}, pair{p.node.ns, p.addr})
	}
	var wg sync.WaitGroup
	errs := make([]error, len(pairs)*2)
	for i, p := range pairs {
		for j, f := range l.families() {
			wg.Go(func() {
				target := netip.AddrPortFrom(p.to.get(f), 1)
				var err error
				for range 5 {
					c := caller{name: string(p.from), ns: p.from}
					a := try(ctx, c, target, timeouts{connect: 1500 * time.Millisecond, io: time.Second}, "settle")
					if a.Fail == failRefused {
						return
					}
					err = fmt.Errorf("%s → %s: %s %v", p.from, target, a.Fail, a.Err)
				}
				errs[2*i+j] = err
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
