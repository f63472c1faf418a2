package lab

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/sourceip/sourceip/examples/policylab/internal/backend"
	"github.com/sourceip/sourceip/examples/policylab/internal/judge"
	"github.com/sourceip/sourceip/examples/policylab/internal/lb"
	"github.com/sourceip/sourceip/examples/policylab/internal/report"
	"github.com/sourceip/sourceip/examples/policylab/internal/topo"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// measureSkew sends SkewConns connections through the passthrough load
// balancer under Local: it spreads over the healthy nodes evenly, each node
// over its own pods, so a pod alone on its node gets twice the share of a pod
// with a sibling. kube-proxy's X-Load-Balancing-Endpoint-Weight says what a
// weighting load balancer would do instead.
func (l *Lab) measureSkew(ctx context.Context) (*report.Skew, error) {
	e := trafficpolicy.Expect(l.lbCase(trafficpolicy.LBPassthrough))
	if err := l.configure(e); err != nil {
		return nil, err
	}
	_, members, _ := l.pass.Snapshot()
	res := &report.Skew{Conns: l.opt.SkewConns, Members: members, Health: l.healthOf(ctx), Tolerance: 0.10}
	atts := backend.Fire(ctx, l.clientCallers(), svcAddr(topo.VIPPassthrough, 4), l.opt.SkewConns, backend.NormalTimeouts)
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
	ready := func(node string) int {
		n := 0
		for _, p := range l.pods {
			if p.Node == node && p.State == backend.PodReady {
				n++
			}
		}
		return n
	}
	weights := map[string]int{}
	total := 0
	for _, h := range res.Health {
		w, _ := strconv.Atoi(h.Weight)
		weights[h.Node] = w
		total += w
		want := ready(h.Node)
		wantCode := 200
		if want == 0 {
			wantCode = 503
		}
		if h.Err != nil || h.Code != wantCode || w != want {
			res.Problems = append(res.Problems, fmt.Sprintf("%s health: %d weight %q (%v), want %d weight %d", h.Node, h.Code, h.Weight, h.Err, wantCode, want))
		}
	}
	for _, p := range l.pods {
		local := ready(p.Node)
		sp := report.SkewPod{Pod: p.Name, Node: p.Node, Count: count[p.Name]}
		sp.Share = float64(sp.Count) / float64(max(res.Delivered, 1))
		if slices.Contains(members, p.Node) && local > 0 {
			sp.Even = 1 / float64(len(members)) / float64(local)
		}
		if total > 0 && local > 0 {
			sp.Weighted = float64(weights[p.Node]) / float64(total) / float64(local)
		}
		if math.Abs(sp.Share-sp.Even) > res.Tolerance {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: share %.2f, expected %.2f ± %.2f", p.Name, sp.Share, sp.Even, res.Tolerance))
		}
		res.Pods = append(res.Pods, sp)
	}
	l.logf("skew: %s", report.VerdictWord(res.Pass()))
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
	From   backend.PodState // the pod's state before the change
	// Change makes the change and returns when kube-proxy's syncs of it
	// ended.
	Change func(ctx context.Context) (synced, error)

	// Case is the model's question for a connection the load balancer still
	// sends to Node inside the window.
	Case trafficpolicy.Case
	// WantFailures: the abrupt removal black-holes connections inside the
	// window; the other transitions must not fail any.
	WantFailures bool
}

// allowed widens the model's window by one interval below and one interval
// plus slack above.
func allowed(w trafficpolicy.Window, interval, slack time.Duration) trafficpolicy.Window {
	return trafficpolicy.Window{Min: max(w.Min-interval, 0), Max: w.Max + interval + slack}
}

// measureWindow drives load through the passthrough load balancer from both
// clients, applies the change, waits for the prober's membership change to be
// applied, keeps the load going for a while, and sorts the attempts into
// inside and outside the window.
//
// The window's bounds are widened for a slow machine from what it measured
// itself: by twice the slowest probe answer of the node (a probe that comes
// back late lands its result in a later round), and by one threshold of
// intervals per probe that got no answer at all. Every duration is measured
// forwards from the change, so none is negative.
func (l *Lab) measureWindow(ctx context.Context, spec windowSpec, try int) (*report.Window, error) {
	res := &report.Window{Name: spec.Name, Event: spec.Event, Node: spec.Node, Try: try, WantUp: spec.WantUp, Model: spec.Model,
		Predicted: spec.Window, Expect: trafficpolicy.Expect(spec.Case)}
	iv := l.opt.Timing.Interval
	from := l.pass.EventCount()
	stop := make(chan struct{})
	lbTimeouts := backend.Timeouts{Connect: report.LoadConnectTimeout, IO: backend.ProbeTimeouts.IO}
	done := backend.Load(ctx, l.clientCallers(), svcAddr(topo.VIPPassthrough, 4), report.LoadWorkers, report.LoadPeriod, lbTimeouts, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-done
		}
	}()
	// Traffic before the change, the baseline, which must not fail: one
	// interval of load.
	select {
	case <-time.After(iv):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	t0 := time.Now()
	syncs, err := spec.Change(ctx)
	if err != nil {
		return nil, err
	}
	// The agent reports the syncs' ends by the wall clock. Each family
	// syncs on its own, and the health answer changes with one of them
	// (the family whose proxier holds the port), so the model's window
	// starts between the first and the last: measure from the first, and
	// widen the upper bound by the time between them.
	tFirst := max(syncs.first.Sub(t0), 0)
	tSync := max(syncs.last.Sub(t0), tFirst)
	limit := spec.Window.Max + 2*iv + 5*time.Second
	ev, err := l.pass.WaitEvent(ctx, from, func(e lb.Event) bool { return e.Change.Target == spec.Node && e.Change.Up == spec.WantUp }, limit)
	if err != nil {
		return nil, err
	}
	// Traffic after the rebuild, which must not fail either.
	select {
	case <-time.After(iv + 100*time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	close(stop)
	atts := <-done
	tEnd := time.Since(t0)

	syncAt := t0.Add(tFirst)
	res.FirstSync, res.Sync = tFirst, tSync
	res.Applied = ev.Applied.Sub(syncAt)
	// A round under way when the sync ended may see its answer: it started
	// before the sync's end, and counts from it.
	res.FirstSaw = max(ev.Change.Since.Sub(syncAt), 0)
	res.Crossed = max(ev.Change.At.Sub(syncAt), 0)
	res.Propagation = max(ev.Applied.Sub(ev.Change.At), 0)

	probes := l.pass.Probes(spec.Node, t0.Add(-2*iv), t0.Add(tEnd))
	var slowest time.Duration
	for _, p := range probes {
		if !p.Start.Before(syncAt.Add(-iv)) && !p.Start.After(ev.Change.At) {
			if !p.Answered {
				res.Unanswered++
			}
			slowest = max(slowest, p.Took)
		}
	}
	threshold := l.opt.Timing.Fall
	if spec.WantUp {
		threshold = l.opt.Timing.Rise
	}
	slack := max(report.WindowSlack, 2*slowest)
	res.Allowed = allowed(spec.Window, iv, slack)
	res.Allowed.Max += tSync - tFirst
	res.Margin = fmt.Sprintf("slowest probe %s; families synced %s apart", report.Ms(slowest), report.Ms(tSync-tFirst))
	if res.Unanswered > 0 {
		res.Allowed.Max += time.Duration(res.Unanswered*threshold) * iv
		res.Margin += fmt.Sprintf("; %d probe(s) unanswered: + %d intervals each", res.Unanswered, threshold)
	}

	// The timeline, for the SVG.
	tl := report.Timeline{FirstSync: tFirst, Sync: tSync, Decided: ev.Change.At.Sub(t0), Applied: ev.Applied.Sub(t0), End: tEnd}
	for _, p := range probes {
		tl.Probes = append(tl.Probes, report.ProbeMark{At: p.Start.Sub(t0), Code: p.Code})
	}
	events, _, _ := l.pass.Snapshot()
	member := !spec.WantUp // the node's membership before the change
	spanFrom := -2 * iv
	for _, e := range events[from:] {
		if e.Change.Target != spec.Node {
			continue
		}
		at := e.Applied.Sub(t0)
		if member && !e.Change.Up {
			tl.Member = append(tl.Member, report.Span{From: spanFrom, To: at})
		}
		if e.Change.Up {
			spanFrom = at
		}
		member = e.Change.Up
	}
	if member {
		tl.Member = append(tl.Member, report.Span{From: spanFrom, To: tEnd})
	}

	end := ev.Applied.Sub(t0)
	const eps = 50 * time.Millisecond
	for _, a := range atts {
		if a.Fail == "" && a.Obs == nil {
			continue // not attempted (stopped)
		}
		res.Attempts++
		off := a.Start.Sub(t0)
		mark := report.ConnMark{At: off, Worker: a.Worker, Outcome: "other"}
		switch {
		case a.Fail != "":
			mark.Outcome = "failed"
		case a.Obs.Node == spec.Node:
			mark.Outcome = "node"
		}
		tl.Conns = append(tl.Conns, mark)
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
		res.Kinds.Add(judge.FailWord(a.Fail))
		if a.Fail == backend.FailOther && len(res.Errors) < 3 && !slices.Contains(res.Errors, a.Err.Error()) {
			res.Errors = append(res.Errors, a.Err.Error())
		}
		if !inside {
			res.Outside++
		}
		res.LastFail = max(res.LastFail, off)
	}
	res.Timeline = tl
	if !res.Allowed.Contains(res.Crossed) {
		res.Problems = append(res.Problems, fmt.Sprintf("the prober decided after %s, outside %s – %s", report.Ms(res.Crossed), report.Ms(res.Allowed.Min), report.Ms(res.Allowed.Max)))
	}
	if res.Outside > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d failures outside the window", res.Outside))
	}
	switch {
	case spec.WantFailures && res.Failures == 0:
		res.Problems = append(res.Problems, "no connection failed inside the window")
	case spec.WantFailures && res.Kinds.N[judge.OutDropped] == 0:
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
	l.logf("window %s (try %d): decided after %s, rules rebuilt after %s (model %v): %s", spec.Name, try, report.Ms(res.Crossed), report.Ms(res.Applied), spec.Window, report.VerdictWord(res.Pass()))
	return res, nil
}
