package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/sourceip/sourceip/trafficpolicy"
)

// lbRules returns the iptables-restore input of the L4 passthrough load
// balancer in one family: the service address is DNATed to the node port of
// each member node, spread evenly with -m statistic as a cloud network load
// balancer or a MetalLB speaker spreads flows over nodes. Nothing is
// masqueraded, so the client's address reaches the node; the nodes route
// clients through the load balancer, whose conntrack entry undoes the DNAT on
// the way back. With no member the address is refused.
func lbRules(f family, members []netip.Addr) string {
	vip := vipPassthrough.get(f)
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:LB-SERVICE - [0:0]\n")
	fmt.Fprintf(&b, "-A PREROUTING -d %s -p tcp --dport %d -j LB-SERVICE\n", vip, servicePort)
	for i, m := range members {
		rule := fmt.Sprintf("-A LB-SERVICE -p tcp -m comment --comment \"member %s\"", m)
		if n := len(members) - i; n > 1 {
			rule += fmt.Sprintf(" -m statistic --mode random --probability %0.10f", 1/float64(n))
		}
		fmt.Fprintf(&b, "%s -j DNAT --to-destination %s\n", rule, netip.AddrPortFrom(m, nodePort))
	}
	b.WriteString("COMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	if len(members) == 0 {
		fmt.Fprintf(&b, "-A FORWARD -d %s -p tcp --dport %d -m comment --comment \"no healthy node\" -j REJECT --reject-with tcp-reset\n", vip, servicePort)
		fmt.Fprintf(&b, "-A INPUT -d %s -p tcp --dport %d -m comment --comment \"no healthy node\" -j REJECT --reject-with tcp-reset\n", vip, servicePort)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// lbEvent is one membership change of the passthrough load balancer: the
// prober's Change and when the rebuilt rules were in place.
type lbEvent struct {
	Change  trafficpolicy.Change
	Members []string
	Applied time.Time
	Err     error
}

// passthroughLB is the L4 load balancer's control loop: a trafficpolicy
// Prober probing each node's health port from the load balancer's namespace,
// and on each membership change the DNAT rules rebuilt for the members, the
// loop a cloud load balancer runs.
type passthroughLB struct {
	lab    *Lab
	prober *trafficpolicy.Prober
	probes *probeRecorder
	port   int // the health port probed
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	events  []lbEvent
	members []string
	notify  chan struct{} // closed and replaced on every event
}

// startPassthrough starts probing port on every node (the healthCheckNodePort
// under Local, kube-proxy's own healthz under Cluster) and programs the load
// balancer with no members until nodes rise.
func (l *Lab) startPassthrough(ctx context.Context, port int) (*passthroughLB, error) {
	var targets []trafficpolicy.Target
	for _, n := range l.nodes {
		targets = append(targets, trafficpolicy.Target{Name: n.name, URL: fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(n.addr.v4, uint16(port)))})
	}
	rec := &probeRecorder{next: &http.Transport{DialContext: l.lb.ns.dialer(), DisableKeepAlives: true}}
	client := &http.Client{
		Transport: rec,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	p, err := trafficpolicy.NewProber(trafficpolicy.ProberConfig{Targets: targets, Timing: l.opt.Timing, Client: client})
	if err != nil {
		return nil, err
	}
	lb := &passthroughLB{lab: l, prober: p, probes: rec, port: port, done: make(chan struct{}), notify: make(chan struct{})}
	if err := lb.apply(ctx, nil); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lb.cancel = cancel
	changes := make(chan trafficpolicy.Change, 64)
	go func() {
		defer close(changes)
		p.Run(rctx, func(c trafficpolicy.Change) {
			select {
			case changes <- c:
			default: // cannot happen with a few nodes; never block the prober
			}
		})
	}()
	go func() {
		defer close(lb.done)
		for c := range changes {
			members := p.Members()
			err := lb.apply(rctx, members)
			lb.mu.Lock()
			lb.events = append(lb.events, lbEvent{Change: c, Members: members, Applied: time.Now(), Err: err})
			lb.members = members
			close(lb.notify)
			lb.notify = make(chan struct{})
			lb.mu.Unlock()
		}
	}()
	return lb, nil
}

// apply programs the load balancer's rules, both families, for members.
func (lb *passthroughLB) apply(ctx context.Context, members []string) error {
	for _, f := range lb.lab.families() {
		var addrs []netip.Addr
		for _, name := range members {
			addrs = append(addrs, lb.lab.node(name).addr.get(f))
		}
		if err := lb.lab.lb.ns.restore(ctx, f, lbRules(f, addrs)); err != nil {
			return err
		}
	}
	return nil
}

func (lb *passthroughLB) stop() {
	if lb == nil || lb.cancel == nil {
		return
	}
	lb.cancel()
	<-lb.done
}

// snapshot returns the events so far and a channel closed at the next one.
func (lb *passthroughLB) snapshot() ([]lbEvent, []string, <-chan struct{}) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return append([]lbEvent(nil), lb.events...), append([]string(nil), lb.members...), lb.notify
}

// waitMembers waits until the applied membership is exactly want.
func (lb *passthroughLB) waitMembers(ctx context.Context, want []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		events, members, next := lb.snapshot()
		for _, e := range events {
			if e.Err != nil {
				return fmt.Errorf("passthrough load balancer: applying %v: %w", e.Members, e.Err)
			}
		}
		if strings.Join(members, ",") == strings.Join(want, ",") {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return fmt.Errorf("passthrough load balancer: members %v, want %v: %w", members, want, ctx.Err())
		}
	}
}

// waitEvent waits for the first event after index from that matches and
// returns it.
func (lb *passthroughLB) waitEvent(ctx context.Context, from int, match func(lbEvent) bool, timeout time.Duration) (lbEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		events, _, next := lb.snapshot()
		for _, e := range events[min(from, len(events)):] {
			if match(e) {
				return e, e.Err
			}
		}
		select {
		case <-next:
		case <-ctx.Done():
			return lbEvent{}, fmt.Errorf("passthrough load balancer: no such membership change: %w", ctx.Err())
		}
	}
}

func (lb *passthroughLB) eventCount() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return len(lb.events)
}

// dialer returns a DialContext that opens connections from inside n.
func (n netns) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := n.do(func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// restore replaces the tables in text atomically with iptables-restore or
// ip6tables-restore.
func (n netns) restore(ctx context.Context, f family, text string) error {
	prog := "iptables-restore"
	if f == 6 {
		prog = "ip6tables-restore"
	}
	return n.run(ctx, text, prog)
}

// probeRecorder notes every probe the prober sends and whether an answer
// came back in time, so a window measurement can tell when the model's
// premise — every probe is answered well within Timeout — did not hold on a
// busy machine.
type probeRecorder struct {
	next http.RoundTripper

	mu     sync.Mutex
	probes []probeRecord
}

type probeRecord struct {
	Host     string // the target's host:port
	Start    time.Time
	Answered bool // an HTTP status came back (200 or 503 alike)
}

const maxProbeRecords = 1 << 14

func (r *probeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := r.next.RoundTrip(req)
	r.mu.Lock()
	if len(r.probes) < maxProbeRecords {
		r.probes = append(r.probes, probeRecord{Host: req.URL.Host, Start: start, Answered: err == nil})
	}
	r.mu.Unlock()
	return resp, err
}

// unanswered counts the probes of host started in [from, to] that got no
// answer.
func (r *probeRecorder) unanswered(host string, from, to time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.probes {
		if p.Host == host && !p.Answered && !p.Start.Before(from) && !p.Start.After(to) {
			n++
		}
	}
	return n
}
