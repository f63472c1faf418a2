package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sourceip/sourceip/examples/policylab/internal/backend"
	"github.com/sourceip/sourceip/examples/policylab/internal/kubeproxy"
	"github.com/sourceip/sourceip/examples/policylab/internal/lb"
	"github.com/sourceip/sourceip/examples/policylab/internal/netns"
	"github.com/sourceip/sourceip/examples/policylab/internal/report"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// Prerequisites returns why the lab cannot run here with modes, or nil.
func Prerequisites(modes []kubeproxy.Mode) error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	progs := []string{"ip", "iptables", "iptables-restore", "haproxy"}
	for _, m := range modes {
		if m == kubeproxy.ModeNFTables {
			progs = append(progs, "nft")
		}
	}
	for _, p := range progs {
		if _, err := netns.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the lab needs %s", strings.Join(missing, ", "))
	}
	return nil
}

// KubeInfo says how the lab runs kube-proxy, for the report.
const KubeInfo = "kube-proxy is k8s.io/kubernetes v1.34.2's own proxier (`pkg/proxy/iptables` or `pkg/proxy/nftables`, dual-stack, masquerade bit 14, cluster CIDRs 203.0.113.128/25 and 2001:db8:244::/48 for the local-traffic detector, min sync period 0 and no periodic resync, so that every sync is a change's) with its health servers (`pkg/proxy/healthcheck`: the Service's health check node port and :10256, node state from a NodeManager over a fake clientset), run in each node's namespace by a copy of the lab's executable."

// Run builds a lab for each kube-proxy mode in turn, runs every scenario in
// it and removes it again, also on failure or when ctx is cancelled. The
// report holds what was measured until then; err is a failure to run, not a
// failed verdict.
func Run(ctx context.Context, opt Options) (rep *report.Report, err error) {
	// An interrupted lab must still remove what it built, whoever called
	// Run (the command or a test binary, which would otherwise die on
	// SIGINT): the first SIGINT, SIGTERM or SIGHUP cancels the run, and a
	// second one ends the process at once, as its default action would, but
	// only after deleting this process's namespaces. A second signal is
	// common: timeout(1) signals the command and then its process group,
	// and people press Ctrl-C twice.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	defer func() {
		signal.Stop(sigs)
		close(done)
	}()
	go func() {
		var s os.Signal
		select {
		case s = <-sigs:
		case <-done:
			return
		}
		cancel(fmt.Errorf("%v signal received", s))
		select {
		case s = <-sigs:
		case <-done:
			return
		}
		removeOwnNamespaces()
		signal.Stop(sigs)
		signal.Reset(s)
		if sig, ok := s.(syscall.Signal); ok {
			syscall.Kill(os.Getpid(), sig)
		}
	}()
	if opt.Timing.Timeout == 0 {
		opt.Timing.Timeout = opt.Timing.Interval
	}
	rep = &report.Report{Started: time.Now(), Timing: opt.Timing, KubeInfo: KubeInfo}
	if err := opt.Validate(); err != nil {
		rep.Err = err
		return rep, fmt.Errorf("options: %w", err)
	}
	rep.Env = environment()
	defer func() {
		// A cancelled run fails wherever the cancellation reached it
		// first (a dial, HAProxy killed by the same signal): say why.
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("stopped early (%w): %w", context.Cause(ctx), err)
		}
		rep.Duration = time.Since(rep.Started)
		rep.Err = err
	}()
	for _, mode := range opt.Modes {
		m := &report.Mode{Name: string(mode)}
		rep.Modes = append(rep.Modes, m)
		if err := runMode(ctx, opt, mode, m, rep); err != nil {
			return rep, fmt.Errorf("%s: %w", mode, err)
		}
	}
	return rep, nil
}

// removeOwnNamespaces deletes every namespace this process created, within
// five seconds, for a process about to die of a signal: its children (the
// agents, HAProxy) die with it.
func removeOwnNamespaces() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if names, err := netns.OwnedBy(ctx, os.Getpid()); err == nil {
		netns.Delete(ctx, names)
	}
}

// runMode is one lab, with kube-proxy in mode.
func runMode(ctx context.Context, opt Options, mode kubeproxy.Mode, m *report.Mode, rep *report.Report) (err error) {
	start := time.Now()
	l := &Lab{opt: opt, mode: mode, policy: trafficpolicy.ExternalCluster, res: m}
	defer func() {
		if cerr := l.cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
		m.Duration = time.Since(start)
	}()
	if err := l.setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	l.ipv6 = opt.IPv6
	if why := l.ipv6Status(ctx, opt.IPv6); why != "" {
		l.ipv6, rep.IPv6 = false, why
	}
	if rep.Topology == "" {
		rep.Topology = l.topology()
	}
	if err := l.settle(ctx); err != nil {
		return fmt.Errorf("links not carrying traffic: %w", err)
	}
	if err := l.startKubeProxies(ctx); err != nil {
		return err
	}
	l.logf("lab %s* up: %d namespaces", l.prefix, len(l.created))
	for _, p := range []trafficpolicy.ExternalTrafficPolicy{trafficpolicy.ExternalCluster, trafficpolicy.ExternalLocal} {
		if err := l.phase(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// ipv6Status tries the IPv6 kernel path the lab needs (ip6tables nat with
// DNAT and the statistic match) and returns why IPv6 is left out, or "".
func (l *Lab) ipv6Status(ctx context.Context, want bool) string {
	if !want {
		return "IPv6 not requested (-ipv6=false)"
	}
	if _, err := netns.LookPath("ip6tables-restore"); err != nil {
		return "ip6tables-restore is not installed"
	}
	if err := l.lb.ns.Restore(ctx, 6, lb.Rules(6, []netip.Addr{topo.NodeAddr(1).V6, topo.NodeAddr(2).V6})); err != nil {
		return "the kernel refuses IPv6 NAT: " + err.Error()
	}
	return ""
}

// phase runs every scenario of one externalTrafficPolicy.
func (l *Lab) phase(ctx context.Context, p trafficpolicy.ExternalTrafficPolicy) error {
	if l.pass != nil {
		l.pass.Stop()
	}
	l.haproxy.Stop()
	l.pass, l.haproxy = nil, nil
	if err := l.setPolicy(ctx, p); err != nil {
		return err
	}
	// Under Local the load balancers probe the Service's healthCheckNodePort;
	// under Cluster there is none, and they probe kube-proxy's healthz.
	port, up := topo.ProxyHealthzPort, l.nodeNames()
	if p == trafficpolicy.ExternalLocal {
		port, up = topo.HealthCheckNodePort, l.nodesWithEndpoints()
	}
	if err := l.configure(trafficpolicy.Expect(l.lbCase(trafficpolicy.LBPassthrough))); err != nil {
		return err
	}
	var err error
	if l.pass, err = lb.StartPassthrough(ctx, lb.PassthroughConfig{NS: l.lb.ns, Families: l.families(), Nodes: l.lbNodes(), Port: port, Path: "/healthz", Timing: l.opt.Timing}); err != nil {
		return err
	}
	if l.haproxy, err = lb.StartHAProxy(ctx, l.lb.ns, port, l.opt.Timing, l.ipv6); err != nil {
		return err
	}
	if err := l.waitLBs(ctx, up); err != nil {
		return err
	}
	l.logf("policy %s: load balancers use %v", p, up)
	if p == trafficpolicy.ExternalLocal {
		l.res.Health = l.healthOf(ctx)
	}

	rows := append(l.externalRows(p), l.inClusterRows(p)...)
	for _, spec := range rows {
		r, err := l.runRow(ctx, spec)
		if err != nil {
			return fmt.Errorf("scenario %d, %s: %w", spec.Scenario, spec.Title, err)
		}
		l.res.Rows = append(l.res.Rows, r)
	}
	if p != trafficpolicy.ExternalLocal {
		return l.drains(ctx)
	}
	if l.res.Skew, err = l.measureSkew(ctx); err != nil {
		return fmt.Errorf("scenario 6: %w", err)
	}
	return l.windows(ctx)
}

// waitLBs waits until both load balancers use exactly the nodes up.
func (l *Lab) waitLBs(ctx context.Context, up []string) error {
	wait := 10*l.opt.Timing.Interval*time.Duration(l.opt.Timing.Rise+l.opt.Timing.Fall) + 2*time.Second
	if err := l.pass.WaitMembers(ctx, up, wait); err != nil {
		return err
	}
	_, err := l.haproxy.WaitUp(ctx, up, wait)
	return err
}

// lbCase is an external client through a load balancer of kind k, for the
// Service as the manifest says it is.
func (l *Lab) lbCase(k trafficpolicy.LBKind) trafficpolicy.Case {
	return trafficpolicy.Case{Type: l.model.Type, External: l.model.ExternalTrafficPolicy, Internal: l.model.InternalTrafficPolicy,
		Distribution: l.model.TrafficDistribution, IPMode: l.model.IPModes()[0], Path: trafficpolicy.PathLoadBalancer, LB: k, LocalEndpoint: true}
}

// windows is scenario 5 on n2, whose only pod is n2-a: a graceful drain (the
// endpoint turns terminating but keeps serving), the pod coming back, and an
// abrupt removal, each timed against the prober's prediction. A transition
// whose first try fails is tried once more from the same starting point.
func (l *Lab) windows(ctx context.Context) error {
	pod := l.pod("n2-a")
	n2 := l.node(pod.Node)
	setup, err := backend.SetupFor(trafficpolicy.Expect(l.lbCase(trafficpolicy.LBPassthrough)), l.net)
	if err != nil {
		return err
	}
	if err := l.configure(trafficpolicy.Expect(l.lbCase(trafficpolicy.LBPassthrough))); err != nil {
		return err
	}
	t := l.opt.Timing
	atN2 := func(local bool) trafficpolicy.Case {
		c := l.lbCase(trafficpolicy.LBPassthrough)
		c.LocalEndpoint = local
		return c
	}
	// set puts n2-a into state st and syncs n2: the change of a window, or
	// the way back to a window's starting point.
	set := func(ctx context.Context, st backend.PodState, moment string) (synced, error) {
		switch st {
		case backend.PodReady:
			if pod.State == backend.PodGone {
				if err := pod.Serve(setup); err != nil {
					return synced{}, err
				}
			}
		case backend.PodGone:
			pod.Close()
		}
		pod.State = st
		return l.syncNode(ctx, n2, moment, false)
	}
	// from puts the lab at a window's starting point: n2-a in state st and
	// the load balancer agreeing.
	from := func(ctx context.Context, st backend.PodState) error {
		if pod.State != st {
			if _, err := set(ctx, st, "n2-a "+stateWord(st)); err != nil {
				return err
			}
		}
		return l.waitLBs(ctx, l.nodesWithEndpoints())
	}
	specs := []windowSpec{
		{
			Name: "drain", Event: "n2-a turns Terminating and keeps serving", Node: n2.name, Model: "Timing.BlackHole()", Window: t.BlackHole(),
			Case: atN2(true), From: backend.PodReady, // a serving, terminating endpoint is still used
			Change: func(ctx context.Context) (synced, error) {
				return set(ctx, backend.PodTerminating, "n2-a Terminating")
			},
		},
		{
			Name: "rejoin", Event: "n2-a Ready again", Node: n2.name, WantUp: true, Model: "Timing.Rejoin()", Window: t.Rejoin(),
			Case: atN2(true), From: backend.PodGone,
			Change: func(ctx context.Context) (synced, error) { return set(ctx, backend.PodReady, "n2-a Ready") },
		},
		{
			Name: "black hole", Event: "n2-a removed at once (crash, force delete)", Node: n2.name, Model: "Timing.BlackHole()", Window: t.BlackHole(),
			Case: atN2(false), WantFailures: true, From: backend.PodReady,
			Change: func(ctx context.Context) (synced, error) { return set(ctx, backend.PodGone, "n2-a removed") },
		},
	}
	for _, spec := range specs {
		for try := 1; try <= 2; try++ {
			if err := from(ctx, spec.From); err != nil {
				return fmt.Errorf("scenario 5, %s: back to the start: %w", spec.Name, err)
			}
			w, err := l.measureWindow(ctx, spec, try)
			if err != nil {
				return fmt.Errorf("scenario 5, %s: %w", spec.Name, err)
			}
			l.res.Windows = append(l.res.Windows, w)
			if w.Pass() {
				break
			}
		}
	}
	return nil
}

func stateWord(s backend.PodState) string {
	switch s {
	case backend.PodReady:
		return "Ready"
	case backend.PodTerminating:
		return "Terminating"
	}
	return "removed"
}

// drains is scenario 8 under Cluster: n3 is marked for deletion by the
// autoscaler's taint, then not; kube-proxy's :10256/healthz and the
// project's NodeHealthServer must answer alike, and the load balancers,
// which probe :10256 under Cluster, must drain n3 and take it back.
func (l *Lab) drains(ctx context.Context) error {
	n3 := l.node("n3")
	steps := []struct {
		event  string
		state  kubeproxy.NodeState
		wantUp bool
	}{
		{"tainted ToBeDeletedByClusterAutoscaler", kubeproxy.NodeState{Taints: []string{trafficpolicy.ToBeDeletedTaint}}, false},
		{"taint removed", kubeproxy.NodeState{}, true},
		{"deletionTimestamp set", kubeproxy.NodeState{Deleting: true}, false},
		{"deletion cancelled", kubeproxy.NodeState{}, true},
	}
	for _, st := range steps {
		d := &report.Drain{Node: n3.name, Event: st.event, WantUp: st.wantUp}
		from := l.pass.EventCount()
		t0 := time.Now()
		if err := l.setNodeState(ctx, n3, st.state, "n3 "+st.event); err != nil {
			return fmt.Errorf("scenario 8: %w", err)
		}
		if c := l.lastComparison("node /healthz"); c != nil {
			d.KubeProxy, d.Own = c.KubeProxy.Code, c.Own.Code
			if !c.Equal {
				d.Problems = append(d.Problems, "the node health answers differ: "+c.Diff)
			}
		}
		if want := map[bool]int{true: 200, false: 503}[st.wantUp]; d.KubeProxy != want {
			d.Problems = append(d.Problems, fmt.Sprintf("kube-proxy's /healthz answered %d, want %d", d.KubeProxy, want))
		}
		limit := l.opt.Timing.BlackHole().Max + 3*l.opt.Timing.Interval + 5*time.Second
		ev, err := l.pass.WaitEvent(ctx, from, func(e lb.Event) bool { return e.Change.Target == n3.name && e.Change.Up == st.wantUp }, limit)
		if err != nil {
			d.Problems = append(d.Problems, "the prober did not decide: "+err.Error())
		} else {
			d.Decided = ev.Change.At.Sub(t0)
		}
		want := l.nodeNames()
		if !st.wantUp {
			want = []string{"n1", "n2"}
		}
		states, err := l.haproxy.WaitUp(ctx, want, limit)
		d.HAProxy = states[n3.name]
		if err != nil {
			d.Problems = append(d.Problems, "HAProxy: "+err.Error())
		}
		l.res.Drains = append(l.res.Drains, d)
		l.logf("drain %s: %s", st.event, report.VerdictWord(d.Pass()))
	}
	return nil
}

// lastComparison returns the latest comparison of what.
func (l *Lab) lastComparison(what string) *report.Comparison {
	l.resMu.Lock()
	defer l.resMu.Unlock()
	for i := len(l.res.Compare) - 1; i >= 0; i-- {
		if l.res.Compare[i].What == what {
			c := l.res.Compare[i]
			return &c
		}
	}
	return nil
}

// environment describes the kernel and tools, for the report.
func environment() string {
	var parts []string
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		parts = append(parts, "Linux "+strings.TrimSpace(string(b)))
	}
	if out, err := exec.Command("iptables", "-V").Output(); err == nil {
		parts = append(parts, strings.TrimSpace(string(out)))
	}
	if p, err := netns.LookPath("nft"); err == nil {
		if out, err := exec.Command(p, "--version").Output(); err == nil {
			parts = append(parts, strings.TrimSpace(string(out)))
		}
	}
	if p, err := netns.LookPath("haproxy"); err == nil {
		if out, err := exec.Command(p, "-v").Output(); err == nil {
			first, _, _ := strings.Cut(string(out), "\n")
			if f := strings.Fields(first); len(f) >= 3 {
				parts = append(parts, "HAProxy "+f[2])
			}
		}
	}
	return strings.Join(parts, ", ")
}
