package main

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/sourceip/sourceip/trafficpolicy"
)

// skewPod is one pod's share of the skew measurement.
type skewPod struct {
	Pod, Node string
	Count     int
	Share     float64 // measured
	Even      float64 // what even spreading over nodes gives it
	Weighted  float64 // what spreading by the health check's weight header would give it
}

// skewResult is scenario 6.
type skewResult struct {
	Conns, Delivered int
	Members          []string
	Pods             []skewPod
	Health           []healthSnap
	Tolerance        float64
	Problems         []string
}

func (s *skewResult) Pass() bool { return len(s.Problems) == 0 }

// measureSkew sends SkewConns connections through the passthrough load
// balancer under Local: it spreads over the healthy nodes evenly, each node
// over its own pods, so a pod alone on its node gets twice the share of a pod
// with a sibling. The health answers' X-Load-Balancing-Endpoint-Weight says
// what a weighting load balancer would do instead.
func (l *Lab) measureSkew(ctx context.Context) (*skewResult, error) {
	e := trafficpolicy.Expect(lbCase(trafficpolicy.ExternalLocal, trafficpolicy.LBPassthrough))
	if err := l.configure(e); err != nil {
		return nil, err
	}
	_, members, _ := l.pass.snapshot()
	res := &skewResult{Conns: l.opt.SkewConns, Members: members, Health: l.healthOf(ctx), Tolerance: 0.10}
	atts := fire(ctx, l.clientCallers(), svcAddr(vipPassthrough, 4), l.opt.SkewConns, normalTimeouts)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, a := range atts {
		if a.Obs != nil {
			res.Delivered++
			count[a.Obs.Pod]++
		}
	}
	if res.Delivered != res.Conns {
		res.Problems = append(res.Problems, fmt.Sprintf("%d of %d connections failed", res.Conns-res.Delivered, res.Conns))
	}
	weights := map[string]int{}
	total := 0
	for _, h := range res.Health {
		w, _ := strconv.Atoi(h.Weight)
		weights[h.Node] = w
		total += w
		want := 0
		for _, p := range l.pods {
			if p.node.name == h.Node && p.state == podReady {
				want++
			}
		}
		wantCode := 200
		if want == 0 {
			wantCode = 503
		}
		if h.Err != nil || h.Code != wantCode || w != want {
			res.Problems = append(res.Problems, fmt.Sprintf("%s health: %d weight %q (%v), want %d weight %d", h.Node, h.Code, h.Weight, h.Err, wantCode, want))
		}
	}
	for _, p := range l.pods {
		local := 0
		for _, q := range l.pods {
			if q.node == p.node && q.state == podReady {
				local++
			}
		}
		sp := skewPod{Pod: p.name, Node: p.node.name, Count: count[p.name]}
		sp.Share = float64(sp.Count) / float64(max(res.Delivered, 1))
		if slices.Contains(members, p.node.name) && local > 0 {
			sp.Even = 1 / float64(len(members)) / float64(local)
		}
		if total > 0 && local > 0 {
			sp.Weighted = float64(weights[p.node.name]) / float64(total) / float64(local)
		}
		if math.Abs(sp.Share-sp.Even) > res.Tolerance {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: share %.2f, expected %.2f ± %.2f", p.name, sp.Share, sp.Even, res.Tolerance))
		}
		res.Pods = append(res.Pods, sp)
	}
	l.logf("skew: %s", verdictWord(res.Pass()))
	return res, nil
}

// windowSpec is one membership transition of scenario 5.
type windowSpec struct {
	Name   string
	Event  string
	Node   string
	WantUp bool
	Model  string // which prediction
	Window trafficpolicy.Window
	Change func(ctx context.Context) error

	// Case is the model's question for a connection the load balancer still
	// sends to Node inside the window.
	Case trafficpolicy.Case
	// WantFailures: the abrupt removal black-holes connections inside the
	// window; the other transitions must not fail any.
	WantFailures bool
}

// windowResult is one measured transition.
type windowResult struct {
	Spec        windowSpec
	Expect      trafficpolicy.Expectation
	Allowed     trafficpolicy.Window
	Sync        time.Duration // the change → kube-proxy's sync done (rules and health answer)
	FirstFail   time.Duration // the prober's first observation of the streak, from the sync
	Crossed     time.Duration // the observation that crossed the threshold, from the sync: the load balancer's decision
	Measured    time.Duration // the sync → the load balancer's rules rebuilt
	Propagation time.Duration // the decision → the rules rebuilt
	Unanswered  int           // probes of the node that got no answer in time while the prober decided
	threshold   int           // fall or rise
	Attempts    int
	InWindow    int // attempts started inside the window
	Failures    int // failed attempts
	Outside     int // failed attempts outside the window
	LastFail    time.Duration
	Kinds       tally
	ServedOn    int      // attempts inside the window served by a pod on Node
	ServedAfter int      // attempts after the window served by a pod on Node
	Errors      []string // distinct errors of failures classified as "error"
	Problems    []string
}

func (w *windowResult) Pass() bool { return len(w.Problems) == 0 }

// A window measurement's load: loadWorkers workers, each starting a
// connection every loadPeriod (about 200 a second in all). A dropped
// connection holds its worker for the connect timeout, so several workers
// keep sampling meanwhile.
const (
	loadWorkers = 8
	loadPeriod  = 40 * time.Millisecond
)

// windowSlack is the scheduling slack added to the model's window, on top of
// one probe interval either way: a round that starts just before the change
// may observe it, and on a shared machine rounds start late.
const windowSlack = 150 * time.Millisecond

// allowed widens the model's window by one interval below and one interval
// plus windowSlack above.
func allowed(w trafficpolicy.Window, interval time.Duration) trafficpolicy.Window {
	return trafficpolicy.Window{Min: max(w.Min-interval, 0), Max: w.Max + interval + windowSlack}
}

// measureWindow drives load through the passthrough load balancer from both
// clients, applies the change, waits for the prober's membership change to be
// applied, keeps the load going for a while, and sorts the attempts into
// inside and outside the window.
func (l *Lab) measureWindow(ctx context.Context, spec windowSpec) (*windowResult, error) {
	res := &windowResult{Spec: spec, Expect: trafficpolicy.Expect(spec.Case)}
	iv := l.opt.Timing.Interval
	res.Allowed = allowed(spec.Window, iv)
	from := l.pass.eventCount()
	stop := make(chan struct{})
	done := load(ctx, l.clientCallers(), svcAddr(vipPassthrough, 4), loadWorkers, loadPeriod, probeTimeouts, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-done
		}
	}()
	time.Sleep(iv) // traffic before the change: the baseline, which must not fail
	t0 := time.Now()
	if err := spec.Change(ctx); err != nil {
		return nil, err
	}
	tSync := time.Now()
	ev, err := l.pass.waitEvent(ctx, from, func(e lbEvent) bool { return e.Change.Target == spec.Node && e.Change.Up == spec.WantUp }, res.Allowed.Max+5*time.Second)
	if err != nil {
		return nil, err
	}
	time.Sleep(iv + 100*time.Millisecond) // traffic after the rebuild, which must not fail
	close(stop)
	atts := <-done
	res.Sync = tSync.Sub(t0)
	res.Measured = ev.Applied.Sub(tSync)
	res.FirstFail = ev.Change.Since.Sub(tSync)
	res.Crossed = ev.Change.At.Sub(tSync)
	res.Propagation = ev.Applied.Sub(ev.Change.At)
	// The model assumes every probe is answered within Timeout. A probe that
	// is not (a busy machine) counts as a failure and can restart the streak,
	// which costs up to one threshold of intervals; widen the bound by that
	// much per such probe, and say so.
	host := netip.AddrPortFrom(l.node(spec.Node).addr.v4, uint16(l.pass.port)).String()
	res.Unanswered = l.pass.probes.unanswered(host, tSync.Add(-iv), ev.Change.At)
	threshold := l.opt.Timing.Fall
	if spec.WantUp {
		threshold = l.opt.Timing.Rise
	}
	res.threshold = threshold
	res.Allowed.Max += time.Duration(res.Unanswered*threshold) * iv
	end := ev.Applied.Sub(t0)
	const eps = 50 * time.Millisecond
	for _, a := range atts {
		if a.Fail == "" && a.Obs == nil {
			continue // not attempted (stopped)
		}
		res.Attempts++
		off := a.Start.Sub(t0)
		inside := off >= -eps && off <= end+eps
		if off >= 0 && off <= end {
			res.InWindow++
			if a.Obs != nil && a.Obs.Node == spec.Node {
				res.ServedOn++
			}
		}
		if off > end && a.Obs != nil && a.Obs.Node == spec.Node {
			res.ServedAfter++
		}
		if a.Fail == "" {
			continue
		}
		res.Failures++
		res.Kinds.add(failWord(a.Fail))
		if a.Fail == failOther && len(res.Errors) < 3 && !slices.Contains(res.Errors, a.Err.Error()) {
			res.Errors = append(res.Errors, a.Err.Error())
		}
		if !inside {
			res.Outside++
		}
		res.LastFail = max(res.LastFail, off)
	}
	if !res.Allowed.Contains(res.Crossed) {
		res.Problems = append(res.Problems, fmt.Sprintf("the prober decided after %v, outside %v", res.Crossed.Round(time.Millisecond), res.Allowed))
	}
	if res.Outside > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d failures outside the window", res.Outside))
	}
	switch {
	case spec.WantFailures && res.Failures == 0:
		res.Problems = append(res.Problems, "no connection failed inside the window")
	case spec.WantFailures && res.Kinds.n[outDropped] == 0:
		res.Problems = append(res.Problems, "no connection was dropped (timed out) inside the window; the model says "+res.Expect.Outcome.String())
	case !spec.WantFailures && res.Failures > 0:
		res.Problems = append(res.Problems, fmt.Sprintf("%d connections failed (%s)", res.Failures, res.Kinds.String()))
	}
	if res.Expect.Outcome == trafficpolicy.Delivered && !spec.WantUp && res.ServedOn == 0 {
		res.Problems = append(res.Problems, "no connection inside the window reached "+spec.Node+": the model says "+res.Expect.Outcome.String())
	}
	if spec.WantUp && res.ServedAfter == 0 {
		res.Problems = append(res.Problems, "no connection after the rebuild reached "+spec.Node)
	}
	l.logf("window %s: decided after %v, rules rebuilt after %v (model %v): %s", spec.Name, res.Crossed.Round(time.Millisecond), res.Measured.Round(time.Millisecond), spec.Window, verdictWord(res.Pass()))
	return res, nil
}
