package main

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

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
	From     []caller
	Target   netip.AddrPort

	// Deployed, when set, configures the backend for this case instead of
	// Case: the PROXY load balancer's path, as a real deployment would, to
	// show what that configuration does with a path that bypasses it.
	Deployed *trafficpolicy.Case

	// Before and After run around the connections, for checks of the row's
	// own (which HAProxy sessions, which pods, which nodes).
	Before func(ctx context.Context) error
	After  func(ctx context.Context, r *rowResult)
}

// rowResult is a row's outcome.
type rowResult struct {
	Spec     rowSpec
	Exp      trafficpolicy.Expectation
	Judged   judgement
	Details  []string
	Problems []string
	Attempts []attempt
}

func (r *rowResult) Pass() bool { return len(r.Problems) == 0 }

func (r *rowResult) problemf(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *rowResult) detailf(format string, args ...any) {
	r.Details = append(r.Details, fmt.Sprintf(format, args...))
}

// configure serves every present pod with the backend setup for e.
func (l *Lab) configure(e trafficpolicy.Expectation) error {
	setup, err := setupFor(e, l.net)
	if err != nil {
		return err
	}
	for _, p := range l.pods {
		if p.state == podGone {
			continue
		}
		if err := p.serve(setup); err != nil {
			return err
		}
		p.takeRejections()
	}
	return nil
}

// runRow configures the backends, makes the row's connections and compares
// what they showed with Expect's answer.
func (l *Lab) runRow(ctx context.Context, spec rowSpec) (*rowResult, error) {
	r := &rowResult{Spec: spec, Exp: trafficpolicy.Expect(spec.Case)}
	backend := r.Exp
	var deployed *trafficpolicy.Expectation
	if spec.Deployed != nil {
		d := trafficpolicy.Expect(*spec.Deployed)
		deployed, backend = &d, d
	}
	if err := l.configure(backend); err != nil {
		return nil, err
	}
	if spec.Before != nil {
		if err := spec.Before(ctx); err != nil {
			return nil, err
		}
	}
	n, to := l.opt.Conns, normalTimeouts
	if r.Exp.Outcome == trafficpolicy.Dropped {
		n, to = 4, probeTimeouts
	}
	r.Attempts = fire(ctx, spec.From, spec.Target, n, to)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rejections := l.rejections(r.Attempts)
	r.Judged = judge(r.Attempts, rejections, spec.From[0].addr.get(familyOf(spec.Target.Addr())), expected(r.Exp, deployed), l.net)
	r.Problems = append(r.Problems, r.Judged.Problems...)
	if served := l.servedBy(r.Attempts); served != "" {
		r.detailf("served by %s", served)
	}
	var failed tally
	for _, a := range r.Attempts {
		if a.Fail != "" {
			failed.add(failWord(a.Fail))
		}
	}
	if len(failed.keys) > 0 {
		note := ""
		if failed.n[outDropped] > 0 {
			note = fmt.Sprintf(" (no answer within the connect timeout of %s)", ms(to.connect))
		}
		r.detailf("failed: %s%s", countsString(&failed), note)
	}
	if spec.After != nil {
		spec.After(ctx, r)
	}
	l.logf("row %d %s: %s", spec.Scenario, spec.Title, verdictWord(r.Pass()))
	return r, nil
}

// rejections collects the refusals of the pods' PROXY listeners. A
// listener reports a refusal after closing the connection, so the caller may
// see the close first: wait, for at most two seconds, until there is a
// refusal for every connection closed without an answer.
func (l *Lab) rejections(atts []attempt) []proxyproto.Rejection {
	closed := 0
	for _, a := range atts {
		if a.Fail == failClosed {
			closed++
		}
	}
	var out []proxyproto.Rejection
	deadline := time.Now().Add(2 * time.Second)
	for {
		for _, p := range l.pods {
			out = append(out, p.takeRejections()...)
		}
		if len(out) >= closed || time.Now().After(deadline) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// servedBy counts the pods that answered.
func (l *Lab) servedBy(atts []attempt) string {
	var t tally
	for _, a := range atts {
		if a.Obs != nil {
			t.add(a.Obs.Pod)
		}
	}
	slices.Sort(t.keys)
	return countsString(&t)
}

func countsString(t *tally) string {
	parts := make([]string, len(t.keys))
	for i, k := range t.keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, t.n[k])
	}
	return strings.Join(parts, ", ")
}

// enteredVia names, for masqueraded connections, the node whose address the
// backend saw: the node the load balancer (or the client) sent it to.
func (l *Lab) enteredVia(atts []attempt) *tally {
	var t tally
	for _, a := range atts {
		if a.Obs == nil {
			continue
		}
		peer := a.Obs.Peer.Addr().Unmap()
		for _, n := range l.nodes {
			if peer == n.addr.v4 || peer == n.addr.v6 || peer == podGateway(n.index).v4 || peer == podGateway(n.index).v6 {
				t.add(n.name)
			}
		}
	}
	slices.Sort(t.keys)
	return &t
}

func verdictWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// lbCase is an external client through a load balancer of kind k.
func lbCase(p trafficpolicy.ExternalTrafficPolicy, k trafficpolicy.LBKind) trafficpolicy.Case {
	return trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathLoadBalancer, LB: k, LocalEndpoint: true}
}

func (l *Lab) clientCallers() []caller {
	out := make([]caller, len(l.clients))
	for i, c := range l.clients {
		out[i] = c.caller()
	}
	return out
}

func svcAddr(d dual, f family) netip.AddrPort { return netip.AddrPortFrom(d.get(f), servicePort) }

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
			Case: lbCase(p, trafficpolicy.LBPassthrough), From: cl, Target: svcAddr(vipPassthrough, f), After: l.afterLB("passthrough")})
	}
	nodePortCase := func(local bool) trafficpolicy.Case {
		return trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathNodePort, LocalEndpoint: local}
	}
	if p == trafficpolicy.ExternalCluster {
		rows = append(rows, rowSpec{Scenario: pass, Title: "client → n3 node port (no pod on n3)", LB: "none",
			Case: nodePortCase(false), From: cl[:1], Target: netip.AddrPortFrom(nodeAddr(3).v4, nodePort)})
	} else {
		rows = append(rows,
			rowSpec{Scenario: pass, Title: "client → n1 node port", LB: "none",
				Case: nodePortCase(true), From: cl[:1], Target: netip.AddrPortFrom(nodeAddr(1).v4, nodePort),
				After: func(_ context.Context, r *rowResult) {
					if r.Exp.Endpoints != trafficpolicy.EndpointsLocal {
						r.problemf("the model expects endpoints %s", r.Exp.Endpoints)
					}
					for _, a := range r.Attempts {
						if a.Obs != nil && a.Obs.Node != "n1" {
							r.problemf("served by %s on %s: the model says node-local endpoints only", a.Obs.Pod, a.Obs.Node)
							return
						}
					}
				}},
			rowSpec{Scenario: pass, Title: "client → n3 node port (no pod on n3)", LB: "none",
				Case: nodePortCase(false), From: cl[:1], Target: netip.AddrPortFrom(nodeAddr(3).v4, nodePort)})
	}
	rows = append(rows, rowSpec{Scenario: 3, Title: "clients (IPv4) → HAProxy VIP", LB: "HAProxy, no PROXY",
		Case: lbCase(p, trafficpolicy.LBFullProxy), From: cl, Target: svcAddr(vipHAProxy, 4), After: l.afterLB("haproxy")})
	for _, f := range l.families() {
		rows = append(rows, rowSpec{Scenario: 4, Title: fmt.Sprintf("clients (%s) → HAProxy PROXY VIP", f), LB: "HAProxy, send-proxy-v2",
			Case: lbCase(p, trafficpolicy.LBProxyProtocol), From: cl, Target: svcAddr(vipHAProxyPP, f), After: l.afterLB("haproxy")})
	}
	return rows
}

// afterLB checks a load-balancer row against the model's Endpoints and
// Health: with any endpoint, connections entering via the node without one
// are forwarded (the masqueraded address names the node); the load balancer
// keeps in rotation every node (node health) or only those with ready
// endpoints (healthCheckNodePort).
func (l *Lab) afterLB(lb string) func(context.Context, *rowResult) {
	return func(ctx context.Context, r *rowResult) {
		if r.Exp.Endpoints == trafficpolicy.EndpointsCluster && r.Exp.Peer == trafficpolicy.PeerNode {
			via := l.enteredVia(r.Attempts)
			r.detailf("entered via %s (the node the backend saw)", countsString(via))
			if via.n["n3"] == 0 {
				r.problemf("no connection entered via n3: the model says any endpoint, so a node without one forwards too")
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
			r.problemf("the model expects health checking %s on a load-balancer path", r.Exp.Health)
		}
		if lb == "haproxy" && l.haproxy != nil {
			states, err := l.haproxy.serverStates(ctx)
			if err != nil {
				r.problemf("haproxy stats: %v", err)
				return
			}
			r.detailf("HAProxy servers: n1 %s, n2 %s, n3 %s", states["n1"], states["n2"], states["n3"])
			for _, n := range l.nodeNames() {
				if inRotation(states[n]) != slices.Contains(want, n) {
					r.problemf("HAProxy has %s %s, want UP only %v", n, states[n], want)
				}
			}
		}
		if lb == "passthrough" && l.pass != nil {
			_, members, _ := l.pass.snapshot()
			r.detailf("passthrough members (prober): %s", strings.Join(members, ", "))
			if !slices.Equal(members, want) {
				r.problemf("passthrough members %v, want %v", members, want)
			}
		}
	}
}

// inClusterRows are scenario 7: a pod on n3 (which has no endpoint) calls the
// PROXY load balancer's address and the cluster IP.
func (l *Lab) inClusterRows(p trafficpolicy.ExternalTrafficPolicy) []rowSpec {
	from := []caller{l.caller.caller()}
	podVIP := trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathPodToLoadBalancerIP, LB: trafficpolicy.LBProxyProtocol}
	deployed := lbCase(p, trafficpolicy.LBProxyProtocol)
	var sessions int
	before := func(ctx context.Context) error {
		var err error
		sessions, err = l.haproxy.frontendSessions(ctx, "pp")
		return err
	}
	after := func(ctx context.Context, r *rowResult) {
		now, err := l.haproxy.frontendSessions(ctx, "pp")
		if err != nil {
			r.problemf("haproxy stats: %v", err)
			return
		}
		r.detailf("HAProxy frontend pp sessions during the row: %d (the load balancer never saw the connections)", now-sessions)
		if now != sessions {
			r.problemf("HAProxy saw %d sessions: the node did not short-circuit", now-sessions)
		}
		if via := l.enteredVia(r.Attempts); len(via.keys) > 0 {
			r.detailf("masqueraded to %s", countsString(via))
		}
	}
	rows := []rowSpec{
		{Scenario: 7, Title: "pod on n3 → HAProxy PROXY VIP (backend configured for this path)", LB: "none: short-circuited by n3",
			Case: podVIP, From: from, Target: svcAddr(vipHAProxyPP, 4), Before: before, After: after},
		{Scenario: 7, Title: "pod on n3 → HAProxy PROXY VIP (backend configured for the PROXY load balancer)", LB: "none: short-circuited by n3",
			Case: podVIP, Deployed: &deployed, From: from, Target: svcAddr(vipHAProxyPP, 4), Before: before, After: after},
	}
	if p == trafficpolicy.ExternalLocal {
		rows = append(rows, rowSpec{Scenario: 7, Title: "pod on n3 → cluster IP", LB: "none",
			Case: trafficpolicy.Case{Type: trafficpolicy.TypeLoadBalancer, External: p, Path: trafficpolicy.PathClusterIP},
			From: from, Target: svcAddr(clusterIP, 4)})
	}
	return rows
}

// healthSnap is one node's health answer as the load balancer gets it.
type healthSnap struct {
	Node   string
	Code   int
	Weight string
	Err    error
}

// healthOf asks every node's healthCheckNodePort from the load balancer's
// namespace.
func (l *Lab) healthOf(ctx context.Context) []healthSnap {
	client := &http.Client{Transport: &http.Transport{DialContext: l.lb.ns.dialer(), DisableKeepAlives: true}, Timeout: time.Second}
	var out []healthSnap
	for _, n := range l.nodes {
		h := healthSnap{Node: n.name}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(n.addr.v4, healthCheckNodePort)), nil)
		resp, err := client.Do(req)
		if err != nil {
			h.Err = err
		} else {
			resp.Body.Close()
			h.Code, h.Weight = resp.StatusCode, resp.Header.Get("X-Load-Balancing-Endpoint-Weight")
		}
		out = append(out, h)
	}
	return out
}
