package main

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

	"github.com/sourceip/sourceip/trafficpolicy"
)

// prerequisites returns why the lab cannot run here, or nil.
func prerequisites() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, p := range []string{"ip", "iptables", "iptables-restore", "haproxy"} {
		if _, err := lookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the lab needs %s", strings.Join(missing, ", "))
	}
	return nil
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		if p, err := exec.LookPath(dir + "/" + name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// Run builds the lab, runs every scenario and removes the lab again, also on
// failure or when ctx is cancelled. The report holds what was measured until
// then; err is a failure to run, not a failed verdict.
func Run(ctx context.Context, opt Options) (rep *Report, err error) {
	// An interrupted lab must still remove what it built, whoever called
	// Run (the command or a test binary, which would otherwise die on
	// SIGINT): the first SIGINT, SIGTERM or SIGHUP cancels the run, and a
	// second one kills at once (the next run then removes what is left).
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	if opt.Timing.Timeout == 0 {
		opt.Timing.Timeout = opt.Timing.Interval
	}
	if err := opt.validate(); err != nil {
		return &Report{Started: time.Now(), Timing: opt.Timing, Err: err}, fmt.Errorf("options: %w", err)
	}
	l := &Lab{opt: opt, policy: trafficpolicy.ExternalCluster}
	rep = &Report{Started: time.Now(), Timing: opt.Timing, Env: environment()}
	defer func() {
		if cerr := l.cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
		rep.Duration = time.Since(rep.Started)
		rep.Err = err
	}()
	if opt.Dir == "" {
		if l.dir, err = os.MkdirTemp("", "policylab-"); err != nil {
			return rep, err
		}
	} else {
		l.dir = opt.Dir
	}
	if err := l.setup(ctx); err != nil {
		return rep, fmt.Errorf("setup: %w", err)
	}
	l.ipv6, rep.IPv6 = opt.IPv6, l.ipv6Status(ctx, opt.IPv6)
	if rep.IPv6 != "" {
		l.ipv6 = false
	}
	rep.Topology = l.topology()
	if err := l.settle(ctx); err != nil {
		return rep, fmt.Errorf("links not carrying traffic: %w", err)
	}
	l.logf("lab %s* up: %d namespaces", l.prefix, len(l.created))

	for _, p := range []trafficpolicy.ExternalTrafficPolicy{trafficpolicy.ExternalCluster, trafficpolicy.ExternalLocal} {
		if err := l.phase(ctx, p, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// ipv6Status tries the IPv6 kernel path the lab needs (ip6tables nat with
// DNAT and the statistic match) and returns why IPv6 is left out, or "".
func (l *Lab) ipv6Status(ctx context.Context, want bool) string {
	if !want {
		return "IPv6 not requested (-ipv6=false)"
	}
	if _, err := lookPath("ip6tables-restore"); err != nil {
		return "ip6tables-restore is not installed"
	}
	if err := l.lb.ns.restore(ctx, 6, lbRules(6, []netip.Addr{nodeAddr(1).v6, nodeAddr(2).v6})); err != nil {
		return "the kernel refuses IPv6 NAT: " + err.Error()
	}
	return ""
}

// phase runs every scenario of one externalTrafficPolicy.
func (l *Lab) phase(ctx context.Context, p trafficpolicy.ExternalTrafficPolicy, rep *Report) error {
	l.pass.stop()
	l.haproxy.stop()
	l.pass, l.haproxy = nil, nil
	l.policy = p
	if err := l.syncAll(ctx); err != nil {
		return err
	}
	// Under Local the load balancers probe the Service's healthCheckNodePort;
	// under Cluster there is none, and they probe kube-proxy's healthz.
	port, up := proxyHealthzPort, l.nodeNames()
	if p == trafficpolicy.ExternalLocal {
		port, up = healthCheckNodePort, l.nodesWithEndpoints()
	}
	if err := l.configure(trafficpolicy.Expect(lbCase(p, trafficpolicy.LBPassthrough))); err != nil {
		return err
	}
	var err error
	if l.pass, err = l.startPassthrough(ctx, port); err != nil {
		return err
	}
	if l.haproxy, err = startHAProxy(ctx, l.lb.ns, l.dir, port, l.opt.Timing, l.ipv6); err != nil {
		return err
	}
	wait := 10*l.opt.Timing.Interval*time.Duration(l.opt.Timing.Rise+l.opt.Timing.Fall) + 2*time.Second
	if err := l.pass.waitMembers(ctx, up, wait); err != nil {
		return err
	}
	if _, err := l.haproxy.waitUp(ctx, up, wait); err != nil {
		return err
	}
	l.logf("policy %s: load balancers use %v", p, up)
	if p == trafficpolicy.ExternalLocal {
		rep.Health = l.healthOf(ctx)
	}

	rows := append(l.externalRows(p), l.inClusterRows(p)...)
	for _, spec := range rows {
		r, err := l.runRow(ctx, spec)
		if err != nil {
			return fmt.Errorf("scenario %d, %s: %w", spec.Scenario, spec.Title, err)
		}
		rep.Rows = append(rep.Rows, r)
	}
	if p != trafficpolicy.ExternalLocal {
		return nil
	}
	if rep.Skew, err = l.measureSkew(ctx); err != nil {
		return fmt.Errorf("scenario 6: %w", err)
	}
	return l.windows(ctx, rep)
}

// windows is scenario 5 on n2, whose only pod is n2-a: a graceful drain (the
// endpoint turns terminating but keeps serving), the pod coming back, and an
// abrupt removal, each timed against the prober's prediction.
func (l *Lab) windows(ctx context.Context, rep *Report) error {
	pod := l.pod("n2-a")
	n2 := pod.node
	setup, err := setupFor(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBPassthrough)), l.net)
	if err != nil {
		return err
	}
	if err := l.configure(trafficpolicy.Expect(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBPassthrough))); err != nil {
		return err
	}
	t := l.opt.Timing
	atN2 := func(local bool) trafficpolicy.Case {
		c := lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBPassthrough)
		c.LocalEndpoint = local
		return c
	}
	specs := []windowSpec{
		{
			Name: "drain", Event: "n2-a turns Terminating and keeps serving", Node: n2.name, Model: "Timing.BlackHole()", Window: t.BlackHole(),
			Case: atN2(true), // a serving, terminating endpoint is still used
			Change: func(ctx context.Context) error {
				pod.state = podTerminating
				return l.syncNode(ctx, n2)
			},
		},
		{
			Name: "rejoin", Event: "n2-a Ready again", Node: n2.name, WantUp: true, Model: "Timing.Rejoin()", Window: t.Rejoin(),
			Case: atN2(true),
			Change: func(ctx context.Context) error {
				if err := pod.serve(setup); err != nil {
					return err
				}
				pod.state = podReady
				return l.syncNode(ctx, n2)
			},
		},
		{
			Name: "black hole", Event: "n2-a removed at once (crash, force delete)", Node: n2.name, Model: "Timing.BlackHole()", Window: t.BlackHole(),
			Case: atN2(false), WantFailures: true,
			Change: func(ctx context.Context) error {
				pod.close()
				pod.state = podGone
				return l.syncNode(ctx, n2)
			},
		},
	}
	for i, spec := range specs {
		w, err := l.measureWindow(ctx, spec)
		if err != nil {
			return fmt.Errorf("scenario 5, %s: %w", spec.Name, err)
		}
		rep.Windows = append(rep.Windows, w)
		if i == 0 {
			// The drained pod goes away for good; no traffic reaches n2 now.
			pod.close()
			pod.state = podGone
			if err := l.syncNode(ctx, n2); err != nil {
				return err
			}
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
	if p, err := lookPath("haproxy"); err == nil {
		if out, err := exec.Command(p, "-v").Output(); err == nil {
			first, _, _ := strings.Cut(string(out), "\n")
			if f := strings.Fields(first); len(f) >= 3 {
				parts = append(parts, "HAProxy "+f[2])
			}
		}
	}
	return strings.Join(parts, ", ")
}
