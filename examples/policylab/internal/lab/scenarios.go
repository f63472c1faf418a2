package lab

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/sourceip/sourceip/examples/policylab/internal/backend"
	"github.com/sourceip/sourceip/examples/policylab/internal/judge"
	"github.com/sourceip/sourceip/examples/policylab/internal/lb"
	"github.com/sourceip/sourceip/examples/policylab/internal/report"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// rowSpec is one question put to the kernel and to the model: who connects
// to which address, through which load balancer, under which policy.
type rowSpec struct {
	Scenario int    // the scenario number
	Title    string // short description of the caller and the path
	LB       string // the load balancer in the path, in words
	Case     trafficpolicy.Case
	From     []backend.Caller
	Target   netip.AddrPort

	// Deployed, when set, configures the backend for this case instead of
	// Case: the PROXY load balancer's path, as a real deployment would, to
	// show what that configuration does with a path that bypasses it.
	Deployed *trafficpolicy.Case

	// Before and After run around the connections, for checks of the row's
	// own (which HAProxy sessions, which pods, which nodes).
	Before func(ctx context.Context) error
	After  func(ctx context.Context, r *report.Row, atts []backend.Attempt)
}

// configure serves every present pod with the backend setup for e.
func (l *Lab) configure(e trafficpolicy.Expectation) error {
	setup, err := backend.SetupFor(e, l.net)
	if err != nil {
		return err
	}
	for _, p := range l.pods {
		if p.State == backend.PodGone {
			continue
		}
		if err := p.Serve(setup); err != nil {
			return err
		}
		p.TakeRejections()
	}
	return nil
}

// runRow configures the backends, makes the row's connections and compares
// what they showed with Expect's answer.
func (l *Lab) runRow(ctx context.Context, spec rowSpec) (*report.Row, error) {
	r := &report.Row{Scenario: spec.Scenario, Title: spec.Title, LB: spec.LB, Exp: trafficpolicy.Expect(spec.Case), Deployed: spec.Deployed != nil}
	configured := r.Exp
	var deployed *trafficpolicy.Expectation
	if spec.Deployed != nil {
		d := trafficpolicy.Expect(*spec.Deployed)
		deployed, configured = &d, d
	}
	if err := l.configure(configured); err != nil {
		return nil, err
	}
	if spec.Before != nil {
		if err := spec.Before(ctx); err != nil {
			return nil, err
		}
	}
	n, to := l.opt.Conns, backend.NormalTimeouts
	if r.Exp.Outcome == trafficpolicy.Dropped {
		n, to = 4, backend.ProbeTimeouts
	}
	atts := backend.Fire(ctx, spec.From, spec.Target, n, to)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rejections := l.rejections(atts)
	r.Judged = judge.Judge(atts, rejections, spec.From[0].Addr.Get(topo.FamilyOf(spec.Target.Addr())), judge.Expected(r.Exp, deployed), l.net)
	r.Problems = append(r.Problems, r.Judged.Problems...)
	if served := l.servedBy(atts); served != "" {
		r.Detailf("served by %s", served)
	}
	var failed judge.Tally
	for _, a := range atts {
		if a.Fail != "" {
			failed.Add(judge.FailWord(a.Fail))
		}
	}
	if len(failed.Keys) > 0 {
		note := ""
		if failed.N[judge.OutDropped] > 0 {
			note = fmt.Sprintf(" (no answer within the connect timeout of %s)", report.Ms(to.Connect))
		}
		r.Detailf("failed: %s%s", countsString(&failed), note)
	}
	r.Conns = len(atts)
	if spec.After != nil {
		spec.After(ctx, r, atts)
	}
	l.logf("row %d %s: %s", spec.Scenario, spec.Title, report.VerdictWord(r.Pass()))
	return r, nil
}

// rejections collects the refusals of the pods' PROXY listeners. A
// listener reports a refusal after closing the connection, so the caller may
// see the close first: wait, for at most two seconds, until there is a
// refusal for every connection closed without an answer.
func (l *Lab) rejections(atts []backend.Attempt) []proxyproto.Rejection {
	closed := 0
	for _, a := range atts {
		if a.Fail == backend.FailClosed {
			closed++
		}
	}
	var out []proxyproto.Rejection
	deadline := time.Now().Add(2 * time.Second)
	for {
		for _, p := range l.pods {
			out = append(out, p.TakeRejections()...)
		}
		if len(out) >= closed || time.Now().After(deadline) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// servedBy counts the pods that answered.
func (l *Lab) servedBy(atts []backend.Attempt) string {
	var t judge.Tally
	for _, a := range atts {
		if a.Obs != nil {
			t.Add(a.Obs.Pod)
		}
	}
	slices.Sort(t.Keys)
	return countsString(&t)
}

func countsString(t *judge.Tally) string {
	parts := make([]string, len(t.Keys))
	for i, k := range t.Keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, t.N[k])
	}
	return strings.Join(parts, ", ")
}

// enteredVia names, for masqueraded connections, the node whose address the
// backend saw: the node the load balancer (or the client) sent it to.
func (l *Lab) enteredVia(atts []backend.Attempt) *judge.Tally {
	var t judge.Tally
	for _, a := range atts {
		if a.Obs == nil {
			continue
		}
		peer := a.Obs.Peer.Addr().Unmap()
		for _, n := range l.nodes {
			if peer == n.addr.V4 || peer == n.addr.V6 || peer == topo.PodGateway(n.index).V4 || peer == topo.PodGateway(n.index).V6 {
				t.Add(n.name)
			}
		}
	}
	slices.Sort(t.Keys)
	return &t
}

func (l *Lab) clientCallers() []backend.Caller {
	out := make([]backend.Caller, len(l.clients))
	for i, c := range l.clients {
		out[i] = c.caller()
	}
	return out
}

func svcAddr(d topo.Dual, f topo.Family) netip.AddrPort {
	return netip.AddrPortFrom(d.Get(f), topo.ServicePort)
}

// externalRows are scenarios 1 to 4 under policy p (Cluster: 1, 3, 4;
// Local: 2, 3, 4), plus direct node-port rows.
func (l *Lab) externalRows(p trafficpolicy.ExternalTrafficPolicy) []rowSpec {
	cl := l.clientCallers()
	pass := 1
	if p == trafficpolicy.ExternalLocal {
		pass = 2
	}
	var rows []rowSpec
	for _, f := range l.families() {
		rows = append(rows, rowSpec{Scenario: pass, Title: fmt.Sprintf("clients (%s) → passthrough VIP", f), LB: "L4 passthrough",
			Case: l.lbCase(trafficpolicy.LBPassthrough), From: cl, Target: svcAddr(topo.VIPPassthrough, f), After: l.afterLB("passthrough")})
	}
	nodePortCase := func(local bool) trafficpolicy.Case {
		return trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathNodePort, LocalEndpoint: local}
	}
	if p == trafficpolicy.ExternalCluster {
		rows = append(rows, rowSpec{Scenario: pass, Title: "client → n3 node port (no pod on n3)", LB: "none",
			Case: nodePortCase(false), From: cl[:1], Target: netip.AddrPortFrom(topo.NodeAddr(3).V4, topo.NodePort)})
	} else {
		rows = append(rows,
			rowSpec{Scenario: pass, Title: "client → n1 node port", LB: "none",
				Case: nodePortCase(true), From: cl[:1], Target: netip.AddrPortFrom(topo.NodeAddr(1).V4, topo.NodePort),
				After: func(_ context.Context, r *report.Row, atts []backend.Attempt) {
					if r.Exp.Endpoints != trafficpolicy.EndpointsLocal {
						r.Problemf("the model expects endpoints %s", r.Exp.Endpoints)
					}
					for _, a := range atts {
						if a.Obs != nil && a.Obs.Node != "n1" {
							r.Problemf("served by %s on %s: the model says node-local endpoints only", a.Obs.Pod, a.Obs.Node)
							return
						}
					}
				}},
			rowSpec{Scenario: pass, Title: "client → n3 node port (no pod on n3)", LB: "none",
				Case: nodePortCase(false), From: cl[:1], Target: netip.AddrPortFrom(topo.NodeAddr(3).V4, topo.NodePort)})
	}
	rows = append(rows, rowSpec{Scenario: 3, Title: "clients (IPv4) → HAProxy VIP", LB: "HAProxy, no PROXY",
		Case: l.lbCase(trafficpolicy.LBFullProxy), From: cl, Target: svcAddr(topo.VIPHAProxy, 4), After: l.afterLB("haproxy")})
	for _, f := range l.families() {
		rows = append(rows, rowSpec{Scenario: 4, Title: fmt.Sprintf("clients (%s) → HAProxy PROXY VIP", f), LB: "HAProxy, send-proxy-v2",
			Case: l.lbCase(trafficpolicy.LBProxyProtocol), From: cl, Target: svcAddr(topo.VIPHAProxyPP, f), After: l.afterLB("haproxy")})
	}
	return rows
}

// afterLB checks a load-balancer row against the model's Endpoints and
// Health: with any endpoint, connections entering via the node without one
// are forwarded (the masqueraded address names the node); the load balancer
// keeps in rotation every node (node health) or only those with ready
// endpoints (healthCheckNodePort).
func (l *Lab) afterLB(which string) func(context.Context, *report.Row, []backend.Attempt) {
	return func(ctx context.Context, r *report.Row, atts []backend.Attempt) {
		if r.Exp.Endpoints == trafficpolicy.EndpointsCluster && r.Exp.Peer == trafficpolicy.PeerNode {
			via := l.enteredVia(atts)
			r.Detailf("entered via %s (the node the backend saw)", countsString(via))
			if via.N["n3"] == 0 {
				r.Problemf("no connection entered via n3: the model says any endpoint, so a node without one forwards too")
			}
		}
		// The model says what keeps traffic from nodes that cannot serve it:
		// the healthCheckNodePort (only nodes with ready endpoints), or node
		// health (every node).
		var want []string
		switch r.Exp.Health {
		case trafficpolicy.HealthCheckNodePort:
			want = l.nodesWithEndpoints()
		case trafficpolicy.HealthNodeProxy:
			want = l.nodeNames()
		default:
			r.Problemf("the model expects health checking %s on a load-balancer path", r.Exp.Health)
		}
		if which == "haproxy" && l.haproxy != nil {
			states, err := l.haproxy.ServerStates(ctx)
			if err != nil {
				r.Problemf("haproxy stats: %v", err)
				return
			}
			r.Detailf("HAProxy servers: n1 %s, n2 %s, n3 %s", states["n1"], states["n2"], states["n3"])
			for _, n := range l.nodeNames() {
				if lb.InRotation(states[n]) != slices.Contains(want, n) {
					r.Problemf("HAProxy has %s %s, want UP only %v", n, states[n], want)
				}
			}
		}
		if which == "passthrough" && l.pass != nil {
			_, members, _ := l.pass.Snapshot()
			r.Detailf("passthrough members (prober): %s", strings.Join(members, ", "))
			if !slices.Equal(members, want) {
				r.Problemf("passthrough members %v, want %v", members, want)
			}
		}
	}
}

// inClusterRows are scenario 7: a pod on n3 (which has no endpoint) calls the
// PROXY load balancer's address and the cluster IP.
func (l *Lab) inClusterRows(p trafficpolicy.ExternalTrafficPolicy) []rowSpec {
	from := []backend.Caller{l.caller.Caller()}
	podVIP := trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathPodToLoadBalancerIP, LB: trafficpolicy.LBProxyProtocol}
	deployed := l.lbCase(trafficpolicy.LBProxyProtocol)
	var sessions int
	before := func(ctx context.Context) error {
		var err error
		sessions, err = l.haproxy.FrontendSessions(ctx, "pp")
		return err
	}
	after := func(ctx context.Context, r *report.Row, atts []backend.Attempt) {
		now, err := l.haproxy.FrontendSessions(ctx, "pp")
		if err != nil {
			r.Problemf("haproxy stats: %v", err)
			return
		}
		r.Detailf("HAProxy frontend pp sessions during the row: %d (the load balancer never saw the connections)", now-sessions)
		if now != sessions {
			r.Problemf("HAProxy saw %d sessions: the node did not short-circuit", now-sessions)
		}
		if via := l.enteredVia(atts); len(via.Keys) > 0 {
			r.Detailf("masqueraded to %s", countsString(via))
		}
	}
	rows := []rowSpec{
		{Scenario: 7, Title: "pod on n3 → HAProxy PROXY VIP (backend configured for this path)", LB: "none: short-circuited by n3",
			Case: podVIP, From: from, Target: svcAddr(topo.VIPHAProxyPP, 4), Before: before, After: after},
		{Scenario: 7, Title: "pod on n3 → HAProxy PROXY VIP (backend configured for the PROXY load balancer)", LB: "none: short-circuited by n3",
			Case: podVIP, Deployed: &deployed, From: from, Target: svcAddr(topo.VIPHAProxyPP, 4), Before: before, After: after},
	}
	if p == trafficpolicy.ExternalLocal {
		rows = append(rows, rowSpec{Scenario: 7, Title: "pod on n3 → cluster IP", LB: "none",
			Case: trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathClusterIP},
			From: from, Target: svcAddr(topo.ClusterIP, 4)})
	}
	return rows
}
