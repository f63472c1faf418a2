// Package lab builds the policy lab in network namespaces for one
// kube-proxy mode, runs every scenario in it and removes it again.
package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/sourceip/sourceip/examples/policylab/internal/backend"
	"github.com/sourceip/sourceip/examples/policylab/internal/kubeproxy"
	"github.com/sourceip/sourceip/examples/policylab/internal/lb"
	"github.com/sourceip/sourceip/examples/policylab/internal/netns"
	"github.com/sourceip/sourceip/examples/policylab/internal/report"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
	"github.com/sourceip/sourceip/trafficpolicy"
	"github.com/sourceip/sourceip/trafficpolicy/manifest"
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

	// Modes are the kube-proxy modes to run every scenario under.
	Modes []kubeproxy.Mode

	// Logf, when set, reports progress.
	Logf func(format string, args ...any)
}

// maxConns bounds Conns and SkewConns: every load loop of the lab is bounded.
const maxConns = 10000

// Validate reports options the lab cannot run with; Run refuses them too.
func (o Options) Validate() error {
	switch {
	case o.Conns < 1 || o.Conns > maxConns:
		return fmt.Errorf("conns %d is outside 1..%d", o.Conns, maxConns)
	case o.SkewConns < 1 || o.SkewConns > maxConns:
		return fmt.Errorf("skew-conns %d is outside 1..%d", o.SkewConns, maxConns)
	case o.Timing.Rise < 1 || o.Timing.Fall < 1:
		return fmt.Errorf("rise %d and fall %d must be at least 1", o.Timing.Rise, o.Timing.Fall)
	case o.Timing.Interval <= 0 || o.Timing.Timeout < 0 || o.Timing.Timeout > o.Timing.Interval:
		return fmt.Errorf("interval %v must be positive and timeout %v at most the interval (0: the interval)", o.Timing.Interval, o.Timing.Timeout)
	case len(o.Modes) == 0:
		return errors.New("no kube-proxy mode")
	}
	for _, m := range o.Modes {
		if m != kubeproxy.ModeIPTables && m != kubeproxy.ModeNFTables {
			return fmt.Errorf("unknown kube-proxy mode %q", m)
		}
	}
	return nil
}

// DefaultOptions are the options of go run . and the test: probes every
// 250 ms, each given the whole interval to answer (the machine may be busy),
// out after 3 failures, in after 2 successes, in both kube-proxy modes.
func DefaultOptions() Options {
	return Options{
		Timing:    trafficpolicy.Timing{Interval: 250 * time.Millisecond, Timeout: 250 * time.Millisecond, Rise: 2, Fall: 3},
		Conns:     24,
		SkewConns: 300,
		IPv6:      true,
		Modes:     []kubeproxy.Mode{kubeproxy.ModeIPTables, kubeproxy.ModeNFTables},
	}
}

// host is a namespace with one address per family.
type host struct {
	name string
	ns   netns.NS
	addr topo.Dual
}

func (h *host) caller() backend.Caller { return backend.Caller{Name: h.name, NS: h.ns, Addr: h.addr} }

// node is a Kubernetes node: kube-proxy (an agent process in the node's
// namespace), and beside it the project's health servers, fed from the same
// EndpointSlices and Node object.
type node struct {
	host
	index  int
	agent  *kubeproxy.Agent
	state  kubeproxy.NodeState
	reg    *trafficpolicy.Registry
	health *trafficpolicy.HealthServer
	nodeHS *trafficpolicy.NodeHealthServer
	srvs   []*http.Server
}

// Lab is one run in one kube-proxy mode: the namespaces it created, the
// servers and processes it runs in them, and the Service's state that the
// nodes' kube-proxies follow.
type Lab struct {
	opt    Options
	mode   kubeproxy.Mode
	prefix string
	ipv6   bool
	net    trafficpolicy.Network

	created []netns.NS // namespaces, for cleanup

	sw      host // the two bridges: client network and node network
	lb      host
	clients []*host
	nodes   []*node
	pods    []*backend.Pod // endpoints of the Service
	caller  *backend.Pod   // a pod that is not an endpoint, for in-cluster calls

	policy  trafficpolicy.ExternalTrafficPolicy
	svc     *v1.Service           // the Service as kube-proxy has it
	model   trafficpolicy.Service // the same manifest, as trafficpolicy reads it
	pass    *lb.Passthrough
	haproxy *lb.HAProxy
	res     *report.Mode // where comparisons go
	resMu   sync.Mutex
}

func (l *Lab) logf(format string, args ...any) {
	if l.opt.Logf != nil {
		l.opt.Logf("%s: "+format, append([]any{l.mode}, args...)...)
	}
}

func (l *Lab) families() []topo.Family {
	if l.ipv6 {
		return []topo.Family{4, 6}
	}
	return []topo.Family{4}
}

func (l *Lab) node(name string) *node {
	for _, n := range l.nodes {
		if n.name == name {
			return n
		}
	}
	panic("no node " + name)
}

func (l *Lab) pod(name string) *backend.Pod {
	for _, p := range l.pods {
		if p.Name == name {
			return p
		}
	}
	panic("no pod " + name)
}

func (l *Lab) newNS(role string) netns.NS {
	ns := netns.NS(l.prefix + role)
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

// modeTag tells apart the namespaces of the labs of one run.
func modeTag(m kubeproxy.Mode) string { return string(m[:1]) }

// setup creates the namespaces, links, addresses and routes, starts the
// project's health servers and kube-proxy on every node. On error the caller
// still calls cleanup.
func (l *Lab) setup(ctx context.Context) error {
	l.prefix = netns.Prefix(os.Getpid(), modeTag(l.mode))
	l.net = topo.Network()
	if stale, err := netns.SweepStale(ctx); err != nil {
		return fmt.Errorf("removing stale namespaces: %w", err)
	} else if len(stale) > 0 {
		l.logf("removed %d stale namespaces of dead runs: %s", len(stale), strings.Join(stale, " "))
	}
	// A run killed outright whose pid this process now has left names the
	// sweep spares (the pid is alive) and that this lab is about to create.
	if mine, err := netns.OwnedBy(ctx, os.Getpid()); err != nil {
		return err
	} else if reclaim := slices.DeleteFunc(mine, func(n string) bool { return !strings.HasPrefix(n, l.prefix) }); len(reclaim) > 0 {
		if err := netns.Delete(ctx, reclaim); err != nil {
			return fmt.Errorf("removing namespaces a dead run with this pid left: %w", err)
		}
		l.logf("removed %d namespaces a dead run with this pid left: %s", len(reclaim), strings.Join(reclaim, " "))
	}

	l.sw = host{name: "sw", ns: l.newNS("sw")}
	l.lb = host{name: "lb", ns: l.newNS("lb"), addr: topo.LBExternal}
	for i := 1; i <= topo.NumClients; i++ {
		l.clients = append(l.clients, &host{name: fmt.Sprintf("c%d", i), ns: l.newNS(fmt.Sprintf("c%d", i)), addr: topo.ClientAddr(i)})
	}
	for _, ly := range layout {
		n := &node{host: host{name: fmt.Sprintf("n%d", ly.node), ns: l.newNS(fmt.Sprintf("n%d", ly.node)), addr: topo.NodeAddr(ly.node)}, index: ly.node, reg: new(trafficpolicy.Registry)}
		l.nodes = append(l.nodes, n)
		for k, name := range ly.pods {
			l.pods = append(l.pods, &backend.Pod{Name: name, NS: l.newNS(strings.ReplaceAll(name, "-", "")), Node: n.name, NodeIndex: ly.node, Addr: topo.PodAddr(ly.node, k)})
		}
	}
	// The in-cluster caller runs on n3, which has no endpoint.
	l.caller = &backend.Pod{Name: "n3-caller", NS: l.newNS("n3caller"), Node: "n3", NodeIndex: 3, Addr: topo.PodAddr(3, 0)}

	var add []string
	for _, ns := range l.created {
		add = append(add, "netns add "+string(ns))
	}
	if err := netns.IPBatch(ctx, "", add); err != nil {
		return err
	}
	routers := map[netns.NS]bool{l.lb.ns: true}
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
		if err := ns.Sysctl(kv...); err != nil {
			return err
		}
	}
	if err := l.wire(ctx); err != nil {
		return err
	}
	for _, n := range l.nodes {
		if err := l.startOwnServers(n); err != nil {
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
	batches := map[netns.NS][]string{}
	swLines := []string{
		"link add name br-ext type bridge mcast_snooping 0", "link set dev br-ext up",
		"link add name br-int type bridge mcast_snooping 0", "link set dev br-int up",
	}
	attach := func(ns netns.NS, ifname, swName, bridge string) {
		batches[ns] = append(batches[ns], fmt.Sprintf("link add name %s type veth peer name %s netns %s", ifname, swName, sw))
		swLines = append(swLines, fmt.Sprintf("link set dev %s master %s", swName, bridge), fmt.Sprintf("link set dev %s up", swName))
	}
	addrs := func(ns netns.NS, ifname string, lines ...string) {
		for _, s := range lines {
			batches[ns] = append(batches[ns], fmt.Sprintf("addr add %s dev %s nodad", s, ifname))
		}
	}
	// Load balancer.
	lbns := l.lb.ns
	batches[lbns] = append(batches[lbns], "link set dev lo up")
	attach(lbns, "ext", "lbx", "br-ext")
	attach(lbns, "int", "lbi", "br-int")
	addrs(lbns, "ext", pfx(topo.LBExternal.V4, 24), pfx(topo.LBExternal.V6, 64))
	addrs(lbns, "int", pfx(topo.LBInternal.V4, 24), pfx(topo.LBInternal.V6, 64))
	for _, v := range []topo.Dual{topo.VIPHAProxy, topo.VIPHAProxyPP} {
		addrs(lbns, "lo", pfx(v.V4, 32), pfx(v.V6, 128))
	}
	batches[lbns] = append(batches[lbns], "link set dev ext up", "link set dev int up")
	// Clients.
	for _, c := range l.clients {
		batches[c.ns] = append(batches[c.ns], "link set dev lo up")
		attach(c.ns, "eth0", c.name, "br-ext")
		addrs(c.ns, "eth0", pfx(c.addr.V4, 24), pfx(c.addr.V6, 64))
		batches[c.ns] = append(batches[c.ns], "link set dev eth0 up",
			"route add default via "+topo.LBExternal.V4.String(), "route add ::/0 via "+topo.LBExternal.V6.String())
	}
	// Nodes and pods.
	podsOf := func(n *node) []*backend.Pod {
		var out []*backend.Pod
		for _, p := range append(slices.Clone(l.pods), l.caller) {
			if p.Node == n.name {
				out = append(out, p)
			}
		}
		return out
	}
	for _, n := range l.nodes {
		batches[n.ns] = append(batches[n.ns], "link set dev lo up")
		attach(n.ns, "eth0", n.name, "br-int")
		addrs(n.ns, "eth0", pfx(n.addr.V4, 24), pfx(n.addr.V6, 64))
		batches[n.ns] = append(batches[n.ns], "link set dev eth0 up",
			"route add default via "+topo.LBInternal.V4.String(), "route add ::/0 via "+topo.LBInternal.V6.String())
		for _, o := range l.nodes {
			if o != n {
				sub := topo.PodSubnet(o.index)
				batches[n.ns] = append(batches[n.ns],
					fmt.Sprintf("route add %s via %s", pfx(sub.V4, topo.PodSubnetBits), o.addr.V4),
					fmt.Sprintf("route add %s via %s", pfx(sub.V6, 64), o.addr.V6))
			}
		}
		gw := topo.PodGateway(n.index)
		for i, p := range podsOf(n) {
			veth := fmt.Sprintf("p%d", i)
			batches[n.ns] = append(batches[n.ns], fmt.Sprintf("link add name %s type veth peer name eth0 netns %s", veth, p.NS))
			addrs(n.ns, veth, pfx(gw.V4, 32), pfx(gw.V6, 128))
			batches[n.ns] = append(batches[n.ns], "link set dev "+veth+" up",
				fmt.Sprintf("route add %s dev %s", pfx(p.Addr.V4, 32), veth),
				fmt.Sprintf("route add %s dev %s", pfx(p.Addr.V6, 128), veth))
			batches[p.NS] = append(batches[p.NS], "link set dev lo up")
			addrs(p.NS, "eth0", pfx(p.Addr.V4, 32), pfx(p.Addr.V6, 128))
			batches[p.NS] = append(batches[p.NS], "link set dev eth0 up",
				fmt.Sprintf("route add %s dev eth0", pfx(gw.V4, 32)),
				fmt.Sprintf("route add default via %s dev eth0", gw.V4),
				fmt.Sprintf("route add %s dev eth0", pfx(gw.V6, 128)),
				fmt.Sprintf("route add ::/0 via %s dev eth0", gw.V6))
		}
	}
	// Links first (each veth from the namespace that is not the switch, and
	// from the node for pods), then the switch's ports, then everything else
	// in parallel.
	order := []netns.NS{lbns}
	for _, c := range l.clients {
		order = append(order, c.ns)
	}
	for _, n := range l.nodes {
		order = append(order, n.ns)
	}
	create := func(ns netns.NS) []string {
		var out []string
		for _, s := range batches[ns] {
			if strings.HasPrefix(s, "link add") {
				out = append(out, s)
			}
		}
		return out
	}
	for _, ns := range order {
		if err := netns.IPBatch(ctx, ns, create(ns)); err != nil {
			return err
		}
		batches[ns] = slices.DeleteFunc(batches[ns], func(s string) bool { return strings.HasPrefix(s, "link add") })
	}
	if err := netns.IPBatch(ctx, l.sw.ns, swLines); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(l.created))
	for i, ns := range l.created {
		wg.Go(func() { errs[i] = netns.IPBatch(ctx, ns, batches[ns]) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startOwnServers starts the project's health servers on node n, beside
// kube-proxy's: a trafficpolicy.HealthServer for the Service on
// topo.OwnHealthPort (fed by the node's Registry) and a
// trafficpolicy.NodeHealthServer on topo.OwnNodeHealthPort. The Service's
// server reports serviceProxyHealthy from the node server, as kube-proxy's
// does from its own.
func (l *Lab) startOwnServers(n *node) error {
	nh, err := trafficpolicy.NewNodeHealthServer(trafficpolicy.NodeHealthConfig{HealthTimeout: 60 * time.Second})
	if err != nil {
		return err
	}
	nh.SetNode(trafficpolicy.NodeState{Known: true})
	hs, err := trafficpolicy.NewHealthServer(trafficpolicy.HealthConfig{Namespace: topo.SvcNamespace, Name: topo.SvcName, Endpoints: n.reg, ProxyHealthy: nh.ProxyHealthy})
	if err != nil {
		return err
	}
	n.health, n.nodeHS = hs, nh
	for port, h := range map[int]http.Handler{topo.OwnHealthPort: hs, topo.OwnNodeHealthPort: nh} {
		ln, err := n.ns.Listen(fmt.Sprintf(":%d", port))
		if err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second}
		n.srvs = append(n.srvs, srv)
		go srv.Serve(ln)
	}
	return nil
}

// startKubeProxies starts an agent on every node, in parallel.
func (l *Lab) startKubeProxies(ctx context.Context) error {
	cidrs := []string{topo.PodCIDR[0].String()}
	if l.ipv6 {
		cidrs = append(cidrs, topo.PodCIDR[1].String())
	}
	for _, n := range l.nodes {
		a, err := kubeproxy.Start(ctx, string(n.ns), kubeproxy.Config{
			Mode: l.mode, Node: l.nodeObject(n), ClusterCIDRs: cidrs, HealthzAddr: fmt.Sprintf(":%d", topo.ProxyHealthzPort),
		})
		if err != nil {
			return err
		}
		n.agent = a
	}
	return nil
}

func (l *Lab) nodeObject(n *node) *v1.Node {
	ips := []netip.Addr{n.addr.V4}
	if l.ipv6 {
		ips = append(ips, n.addr.V6)
	}
	return kubeproxy.NodeObject(n.name, ips, n.state)
}

// endpoints returns the Service's endpoints as the EndpointSlice controller
// would list them now.
func (l *Lab) endpoints() []kubeproxy.Endpoint {
	var eps []kubeproxy.Endpoint
	for _, p := range l.pods {
		for _, f := range l.families() {
			switch p.State {
			case backend.PodReady:
				eps = append(eps, kubeproxy.Endpoint{Addr: p.Addr.Get(f), Node: p.Node, Ready: true, Serving: true})
			case backend.PodTerminating:
				eps = append(eps, kubeproxy.Endpoint{Addr: p.Addr.Get(f), Node: p.Node, Serving: true, Terminating: true})
			}
		}
	}
	return eps
}

// setPolicy makes the Service's externalTrafficPolicy p: its manifest,
// read by trafficpolicy for the model and given to every node's kube-proxy
// (with the current EndpointSlices), and every node's comparison of the
// health answers.
func (l *Lab) setPolicy(ctx context.Context, p trafficpolicy.ExternalTrafficPolicy) error {
	data := topo.ServiceManifest(p)
	model, err := manifest.Parse(data)
	if err != nil {
		return fmt.Errorf("the lab's manifest: %w", err)
	}
	if model.ExternalTrafficPolicy != p {
		return fmt.Errorf("the lab's manifest for %s says %s", p, model.ExternalTrafficPolicy)
	}
	svc, err := kubeproxy.DecodeService(data)
	if err != nil {
		return err
	}
	l.policy, l.model, l.svc = p, model, svc
	return l.syncAll(ctx, "Service "+p.String(), true)
}

// syncNode is one change reaching kube-proxy on n: the current
// EndpointSlices (and the Service, when withService), synced in every
// family; then the project's servers learn the same (the Registry from the
// same endpoints, the node server's per-family Updated), and both answers
// are compared. It returns when kube-proxy's syncs of the first and the last
// family ended.
func (l *Lab) syncNode(ctx context.Context, n *node, moment string, withService bool) (synced, error) {
	req := kubeproxy.Request{Slices: kubeproxy.Slices(l.svc, "http", topo.TargetPort, l.endpoints())}
	if withService {
		req.Service = l.svc
	}
	for _, f := range l.families() {
		n.nodeHS.QueuedUpdate(ownFamily(f))
	}
	rep, err := n.agent.Do(ctx, req)
	if err != nil {
		return synced{}, fmt.Errorf("node %s: %w", n.name, err)
	}
	done := synced{first: rep.FirstSyncedAt(), last: rep.SyncedAt()}
	// kube-proxy's health check node port counts the endpoints of one
	// family, that of the proxier that got the port (kubernetes#114702);
	// every pod here has both, so the Registry holds the IPv4 ones. Holding
	// both would count each pod twice.
	for _, p := range l.pods {
		if p.Node != n.name {
			continue
		}
		ep := netip.AddrPortFrom(p.Addr.V4, topo.TargetPort)
		switch p.State {
		case backend.PodReady:
			n.reg.Set(ep, trafficpolicy.EndpointReady)
		case backend.PodTerminating:
			n.reg.Set(ep, trafficpolicy.EndpointTerminating)
		case backend.PodGone:
			n.reg.Remove(ep)
		}
	}
	for _, f := range l.families() {
		n.nodeHS.Updated(ownFamily(f))
	}
	l.compare(ctx, n, moment)
	return done, nil
}

// synced is when kube-proxy's syncs of a change ended, by the wall clock:
// each IP family's proxier syncs on its own.
type synced struct{ first, last time.Time }

func ownFamily(f topo.Family) trafficpolicy.IPFamily {
	if f == 6 {
		return trafficpolicy.IPv6
	}
	return trafficpolicy.IPv4
}

// setNodeState gives node n a new state: kube-proxy's NodeManager and the
// project's node server learn it, and their answers are compared.
func (l *Lab) setNodeState(ctx context.Context, n *node, st kubeproxy.NodeState, moment string) error {
	n.state = st
	if _, err := n.agent.Do(ctx, kubeproxy.Request{Node: l.nodeObject(n)}); err != nil {
		return err
	}
	n.nodeHS.SetNode(trafficpolicy.NodeState{Known: true, Deleting: st.Deleting, Taints: st.Taints})
	l.compare(ctx, n, moment)
	return nil
}

// syncAll syncs every node, in parallel.
func (l *Lab) syncAll(ctx context.Context, moment string, withService bool) error {
	var wg sync.WaitGroup
	errs := make([]error, len(l.nodes))
	for i, n := range l.nodes {
		wg.Go(func() {
			_, errs[i] = l.syncNode(ctx, n, moment, withService)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// nodesWithEndpoints returns the names of the nodes with a ready endpoint.
func (l *Lab) nodesWithEndpoints() []string {
	var out []string
	for _, n := range l.nodes {
		for _, p := range l.pods {
			if p.Node == n.name && p.State == backend.PodReady {
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

func (l *Lab) lbNodes() []lb.Node {
	var out []lb.Node
	for _, n := range l.nodes {
		out = append(out, lb.Node{Name: n.name, Addr: n.addr})
	}
	return out
}

// cleanup stops everything the lab started and deletes its namespaces, which
// takes every veth and bridge with it. It uses its own context so that it
// also runs after the lab's was cancelled.
func (l *Lab) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if l.pass != nil {
		l.pass.Stop()
	}
	l.haproxy.Stop()
	for _, p := range append(slices.Clone(l.pods), l.caller) {
		if p != nil {
			p.Close()
		}
	}
	var wg sync.WaitGroup
	for _, n := range l.nodes {
		for _, s := range n.srvs {
			s.Close()
		}
		wg.Go(n.agent.Stop)
	}
	wg.Wait()
	var names []string
	for _, ns := range l.created {
		if _, err := os.Stat(ns.Path()); err == nil {
			names = append(names, string(ns))
		}
	}
	err := netns.Delete(ctx, names)
	left, lerr := netns.Owned(ctx)
	for name := range left {
		if strings.HasPrefix(name, l.prefix) {
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
		from netns.NS
		to   topo.Dual
	}
	var pairs []pair
	for _, c := range l.clients {
		pairs = append(pairs, pair{c.ns, topo.LBExternal})
	}
	for _, n := range l.nodes {
		pairs = append(pairs, pair{l.lb.ns, n.addr}, pair{n.ns, topo.LBInternal})
		for _, o := range l.nodes {
			if o != n {
				pairs = append(pairs, pair{n.ns, o.addr})
			}
		}
	}
	for _, p := range append(slices.Clone(l.pods), l.caller) {
		pairs = append(pairs, pair{p.NS, topo.PodGateway(p.NodeIndex)}, pair{l.node(p.Node).ns, p.Addr})
	}
	var wg sync.WaitGroup
	errs := make([]error, len(pairs)*2)
	for i, p := range pairs {
		for j, f := range l.families() {
			wg.Go(func() {
				target := netip.AddrPortFrom(p.to.Get(f), 1)
				var err error
				for range 5 {
					c := backend.Caller{Name: string(p.from), NS: p.from}
					a := backend.Try(ctx, c, target, backend.Timeouts{Connect: 1500 * time.Millisecond, IO: time.Second}, "settle")
					if a.Fail == backend.FailRefused {
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
