// Package lb is the lab's two load balancers: an L4 passthrough load
// balancer (DNAT to member nodes, members from a trafficpolicy.Prober) and a
// real HAProxy in TCP mode, with and without send-proxy-v2.
package lb

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sourceip/sourceip/trafficpolicy"

	"github.com/sourceip/sourceip/examples/policylab/internal/netns"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
)

// Rules returns the iptables-restore input of the L4 passthrough load
// balancer in one topo.Family: the service address is DNATed to the node port of
// each member node, spread evenly with -m statistic as a cloud network load
// balancer or a MetalLB speaker spreads flows over nodes. Nothing is
// masqueraded, so the client's address reaches the node; the nodes route
// clients through the load balancer, whose conntrack entry undoes the DNAT on
// the way back. With no member the address is refused.
func Rules(f topo.Family, members []netip.Addr) string {
	vip := topo.VIPPassthrough.Get(f)
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:LB-SERVICE - [0:0]\n")
	fmt.Fprintf(&b, "-A PREROUTING -d %s -p tcp --dport %d -j LB-SERVICE\n", vip, topo.ServicePort)
	for i, m := range members {
		rule := fmt.Sprintf("-A LB-SERVICE -p tcp -m comment --comment \"member %s\"", m)
		if n := len(members) - i; n > 1 {
			rule += fmt.Sprintf(" -m statistic --mode random --probability %0.10f", 1/float64(n))
		}
		fmt.Fprintf(&b, "%s -j DNAT --to-destination %s\n", rule, netip.AddrPortFrom(m, topo.NodePort))
	}
	b.WriteString("COMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	if len(members) == 0 {
		fmt.Fprintf(&b, "-A FORWARD -d %s -p tcp --dport %d -m comment --comment \"no healthy node\" -j REJECT --reject-with tcp-reset\n", vip, topo.ServicePort)
		fmt.Fprintf(&b, "-A INPUT -d %s -p tcp --dport %d -m comment --comment \"no healthy node\" -j REJECT --reject-with tcp-reset\n", vip, topo.ServicePort)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Event is one membership change of the passthrough load balancer: the
// prober's Change and when the rebuilt rules were in place.
type Event struct {
	Change  trafficpolicy.Change
	Members []string
	Applied time.Time
	Err     error
}

// Passthrough is the L4 load balancer's control loop: a trafficpolicy
// Prober probing each node's health port from the load balancer's namespace,
// and on each membership change the DNAT rules rebuilt for the members, the
// loop a cloud load balancer runs.
type Passthrough struct {
	cfg    PassthroughConfig
	prober *trafficpolicy.Prober
	probes *probeRecorder
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	events  []Event
	members []string
	notify  chan struct{} // closed and replaced on every event
}

// Node is a member candidate: a node's name and addresses.
type Node struct {
	Name string
	Addr topo.Dual
}

// PassthroughConfig configures the passthrough load balancer.
type PassthroughConfig struct {
	NS       netns.NS      // the load balancer's namespace
	Families []topo.Family // the families it forwards
	Nodes    []Node
	Port     int    // the health port probed on each node's IPv4 address
	Path     string // and its path
	Timing   trafficpolicy.Timing
}

// StartPassthrough starts probing cfg.Port on every node (the
// healthCheckNodePort under Local, kube-proxy's own healthz under Cluster)
// and programs the load balancer with no members until nodes rise.
func StartPassthrough(ctx context.Context, cfg PassthroughConfig) (*Passthrough, error) {
	var targets []trafficpolicy.Target
	for _, n := range cfg.Nodes {
		targets = append(targets, trafficpolicy.Target{Name: n.Name, URL: fmt.Sprintf("http://%s%s", netip.AddrPortFrom(n.Addr.V4, uint16(cfg.Port)), cfg.Path)})
	}
	rec := &probeRecorder{next: &http.Transport{DialContext: cfg.NS.Dialer(), DisableKeepAlives: true}}
	client := &http.Client{
		Transport: rec,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	p, err := trafficpolicy.NewProber(trafficpolicy.ProberConfig{Targets: targets, Timing: cfg.Timing, Client: client})
	if err != nil {
		return nil, err
	}
	lb := &Passthrough{cfg: cfg, prober: p, probes: rec, done: make(chan struct{}), notify: make(chan struct{})}
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
			lb.events = append(lb.events, Event{Change: c, Members: members, Applied: time.Now(), Err: err})
			lb.members = members
			close(lb.notify)
			lb.notify = make(chan struct{})
			lb.mu.Unlock()
		}
	}()
	return lb, nil
}

// apply programs the load balancer's rules, both families, for members.
func (lb *Passthrough) apply(ctx context.Context, members []string) error {
	for _, f := range lb.cfg.Families {
		var addrs []netip.Addr
		for _, n := range lb.cfg.Nodes {
			if slices.Contains(members, n.Name) {
				addrs = append(addrs, n.Addr.Get(f))
			}
		}
		if err := lb.cfg.NS.Restore(ctx, int(f), Rules(f, addrs)); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops probing; the rules stay as they are.
func (lb *Passthrough) Stop() {
	if lb == nil || lb.cancel == nil {
		return
	}
	lb.cancel()
	<-lb.done
}

// Snapshot returns the events so far and a channel closed at the next one.
func (lb *Passthrough) Snapshot() ([]Event, []string, <-chan struct{}) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return append([]Event(nil), lb.events...), append([]string(nil), lb.members...), lb.notify
}

// WaitMembers waits until the applied membership is exactly want.
func (lb *Passthrough) WaitMembers(ctx context.Context, want []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		events, members, next := lb.Snapshot()
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

// WaitEvent waits for the first event after index from that matches and
// returns it.
func (lb *Passthrough) WaitEvent(ctx context.Context, from int, match func(Event) bool, timeout time.Duration) (Event, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		events, _, next := lb.Snapshot()
		for _, e := range events[min(from, len(events)):] {
			if match(e) {
				return e, e.Err
			}
		}
		select {
		case <-next:
		case <-ctx.Done():
			return Event{}, fmt.Errorf("passthrough load balancer: no such membership change: %w", ctx.Err())
		}
	}
}

// EventCount returns the number of events so far.
func (lb *Passthrough) EventCount() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return len(lb.events)
}

// probeRecorder notes every probe the prober sends and whether an answer
// came back in time, so a window measurement can tell when the model's
// premise — every probe is answered well within Timeout — did not hold on a
// busy machine.
type probeRecorder struct {
	next http.RoundTripper

	mu     sync.Mutex
	probes []ProbeRecord
}

// ProbeRecord is one probe the prober sent.
type ProbeRecord struct {
	Host     string // the target's host:port
	Start    time.Time
	Took     time.Duration
	Answered bool // an HTTP status came back (200 or 503 alike)
	Code     int
}

const maxProbeRecords = 1 << 14

func (r *probeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := r.next.RoundTrip(req)
	rec := ProbeRecord{Host: req.URL.Host, Start: start, Took: time.Since(start), Answered: err == nil}
	if err == nil {
		rec.Code = resp.StatusCode
	}
	r.mu.Lock()
	if len(r.probes) < maxProbeRecords {
		r.probes = append(r.probes, rec)
	}
	r.mu.Unlock()
	return resp, err
}

// Probes returns the probes of the node named name started in [from, to].
func (lb *Passthrough) Probes(name string, from, to time.Time) []ProbeRecord {
	host := ""
	for _, n := range lb.cfg.Nodes {
		if n.Name == name {
			host = netip.AddrPortFrom(n.Addr.V4, uint16(lb.cfg.Port)).String()
		}
	}
	r := lb.probes
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ProbeRecord
	for _, p := range r.probes {
		if p.Host == host && !p.Start.Before(from) && !p.Start.After(to) {
			out = append(out, p)
		}
	}
	return out
}
