package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sourceip/sourceip/trafficpolicy"
)

// Report is the outcome of a lab run.
type Report struct {
	Started  time.Time
	Duration time.Duration
	Env      string
	Timing   trafficpolicy.Timing
	Topology string
	IPv6     string // why IPv6 was left out; "" when it ran

	Rows    []*rowResult
	Health  []healthSnap
	Skew    *skewResult
	Windows []*windowResult
	Err     error
}

// Passed reports whether the lab ran to the end and every verdict passed.
func (r *Report) Passed() bool {
	if r.Err != nil || r.Skew == nil || len(r.Windows) == 0 {
		return false
	}
	for _, row := range r.Rows {
		if !row.Pass() {
			return false
		}
	}
	for _, w := range r.Windows {
		if !w.Pass() {
			return false
		}
	}
	return r.Skew.Pass()
}

// Failures lists every failed verdict, one line each.
func (r *Report) Failures() []string {
	var out []string
	if r.Err != nil {
		out = append(out, "run: "+r.Err.Error())
	}
	for _, row := range r.Rows {
		for _, p := range row.Problems {
			out = append(out, fmt.Sprintf("scenario %d (%s, %s): %s", row.Spec.Scenario, row.Exp.Case.External, row.Spec.Title, p))
		}
	}
	if r.Skew != nil {
		for _, p := range r.Skew.Problems {
			out = append(out, "scenario 6: "+p)
		}
	}
	for _, w := range r.Windows {
		for _, p := range w.Problems {
			out = append(out, fmt.Sprintf("scenario 5 (%s): %s", w.Spec.Name, p))
		}
	}
	return out
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}

func window(w trafficpolicy.Window) string { return ms(w.Min) + " – " + ms(w.Max) }

// cell is the kernel's value, marked with the model's verdict.
func cell(kernel, model string) string {
	if kernel == model {
		return kernel + " ✓"
	}
	return fmt.Sprintf("**%s** ✗ (model: %s)", kernel, model)
}

func policyOf(r *rowResult) string {
	if r.Exp.Case.Path == trafficpolicy.PathClusterIP {
		return "internal " + r.Exp.Case.Internal.String()
	}
	return r.Exp.Case.External.String()
}

// Markdown writes the report.
func (r *Report) Markdown(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	p("# policylab report\n\n")
	p("%s. Run %s, took %.1f s. Verdict: **%s**.\n\n", r.Env, r.Started.UTC().Format(time.RFC3339), r.Duration.Seconds(), verdict)
	t := r.Timing
	p("Both load balancers health-check every %s (timeout %s), take a node out after %d failures and back after %d successes: the trafficpolicy prober for the passthrough load balancer, HAProxy's `inter`/`timeout check`/`fall`/`rise` for the full proxy. The model predicts a black hole of %s and a rejoin delay of %s (`Timing.BlackHole`, `Timing.Rejoin`).\n\n",
		ms(t.Interval), ms(t.Timeout), t.Fall, t.Rise, window(t.BlackHole()), window(t.Rejoin()))
	if r.Err != nil {
		p("**The lab did not run to the end:** %s\n\n", r.Err)
	}
	if r.Topology != "" {
		p("## Topology\n\n```text\n%s```\n\n", r.Topology)
	}

	p("## What the backend observed, layer by layer\n\n")
	p("Each row is one `trafficpolicy.Case`. The echo backend reports, per connection, its socket peer, the PROXY header a trusted upstream sent, and clientip's answer with the configuration `Expectation.Config` gives for that case (a PROXY listener trusting the same hops when the path carries a header). A cell shows what the kernel delivered, ✓ when `trafficpolicy.Expect` says the same for every connection of the row, ✗ and the model's answer when not. \"client\" is the caller's own address, compared per connection.\n\n")
	p("| # | policy | caller → address | load balancer | outcome | socket peer | PROXY header | client survives in | clientip | verdict |\n")
	p("|---|---|---|---|---|---|---|---|---|---|\n")
	rows := slices.Clone(r.Rows)
	slices.SortStableFunc(rows, func(a, b *rowResult) int { return a.Spec.Scenario - b.Spec.Scenario })
	for _, row := range rows {
		o, e := row.Judged.Observed, row.Judged.Expected
		p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Spec.Scenario, policyOf(row), row.Spec.Title, row.Spec.LB,
			cell(o.Outcome, e.Outcome), cell(o.Peer, e.Peer), cell(o.Proxy, e.Proxy), cell(o.Survives, e.Survives), cell(o.ClientIP, e.ClientIP), verdictWord(row.Pass()))
	}
	p("\nDetails:\n\n")
	for _, row := range rows {
		peers := strings.Join(row.Judged.Peers, ", ")
		if peers == "" {
			peers = "none"
		}
		p("- **%d, %s, %s** (%d connections): socket peers %s", row.Spec.Scenario, policyOf(row), row.Spec.Title, len(row.Attempts), peers)
		for _, d := range row.Details {
			p("; %s", d)
		}
		p(". Model: %s\n", row.Exp.String())
		for _, pr := range row.Problems {
			p("  - ✗ %s\n", pr)
		}
	}

	if len(r.Health) > 0 {
		p("\n## Health answers under Local (healthCheckNodePort %d, asked from the load balancer)\n\n", healthCheckNodePort)
		p("| node | status | X-Load-Balancing-Endpoint-Weight |\n|---|---|---|\n")
		for _, h := range r.Health {
			if h.Err != nil {
				p("| %s | error: %v | |\n", h.Node, h.Err)
				continue
			}
			p("| %s | %d | %s |\n", h.Node, h.Code, h.Weight)
		}
		p("\nThe prober and HAProxy both take n3 (no pod) out of rotation; scenario 2's rows show no connection was lost to it.\n")
	}

	if len(r.Windows) > 0 {
		p("\n## Scenario 5: pod removal under Local, the black-hole window\n\n")
		p("Load: %d workers, each starting a connection through the passthrough load balancer every %s (connect timeout %s), from both clients, before, during and after each change to n2's only pod. *Sync* is how long n2's kube-proxy sync took after the change (rules in both families, then the health answer, as kube-proxy orders them); the model's window starts at its end. The prober's times are the starts of its rounds, from the end of the sync: the first that saw the new answer, and the one that crossed fall (rise) and so *decided* — the moment `Timing.BlackHole` (`Timing.Rejoin`) predicts, asserted against the model's window widened by one interval below and one interval plus %s above. *Rules rebuilt* is when the load balancer's DNAT rules changed, with the propagation delay after the decision in brackets (the model leaves it to the load balancer). Failures count from the change itself until the rules were rebuilt; none may fall outside.\n\n",
			loadWorkers, ms(loadPeriod), ms(probeTimeouts.connect), ms(windowSlack))
		p("| transition | event | sync | model | prober: first saw / decided | allowed | rules rebuilt | attempts in window | failed (kind) | last failure | verdict |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, wr := range r.Windows {
			kinds := "0"
			if wr.Failures > 0 {
				kinds = fmt.Sprintf("%d (%s)", wr.Failures, wr.Kinds.String())
			}
			last := dash
			if wr.Failures > 0 {
				last = ms(wr.LastFail)
			}
			allowedCell := window(wr.Allowed)
			if wr.Unanswered > 0 {
				allowedCell += fmt.Sprintf(" (%d probe(s) unanswered: + %d intervals each)", wr.Unanswered, wr.threshold)
			}
			p("| %s | %s | %s | %s %s | %s / **%s** | %s | %s (+%s) | %d | %s | %s | %s |\n", wr.Spec.Name, wr.Spec.Event, ms(wr.Sync), wr.Spec.Model, window(wr.Spec.Window),
				ms(wr.FirstFail), ms(wr.Crossed), allowedCell, ms(wr.Measured), ms(wr.Propagation), wr.InWindow, kinds, last, verdictWord(wr.Pass()))
		}
		p("\n")
		for _, wr := range r.Windows {
			p("- %s: model for a connection sent to n2 inside the window: %s, %s.", wr.Spec.Name, wr.Expect.Outcome, wr.Expect.Rule)
			if wr.Spec.WantUp {
				p(" %d connections after the rebuild were served on n2.", wr.ServedAfter)
			} else if wr.Expect.Outcome == trafficpolicy.Delivered {
				p(" %d connections inside the window were served on n2 by its terminating pod.", wr.ServedOn)
			}
			for _, e := range wr.Errors {
				p(" Error: %s.", e)
			}
			p("\n")
			for _, pr := range wr.Problems {
				p("  - ✗ %s\n", pr)
			}
		}
	}

	if s := r.Skew; s != nil {
		p("\n## Scenario 6: skew under Local\n\n")
		p("%d connections through the passthrough load balancer, which spreads evenly over its members (%s); each node spreads over its own pods only (KUBE-SVL).\n\n", s.Conns, strings.Join(s.Members, ", "))
		p("| pod | node | connections | share | expected (even per node) | by the weight header | verdict |\n|---|---|---|---|---|---|---|\n")
		for _, sp := range s.Pods {
			ok := abs(sp.Share-sp.Even) <= s.Tolerance
			p("| %s | %s | %d | %.1f %% | %.1f %% | %.1f %% | %s |\n", sp.Pod, sp.Node, sp.Count, 100*sp.Share, 100*sp.Even, 100*sp.Weighted, verdictWord(ok))
		}
		var ws []string
		for _, h := range s.Health {
			ws = append(ws, fmt.Sprintf("%s: %s (%d)", h.Node, h.Weight, h.Code))
		}
		p("\nWeight headers: %s. A load balancer that honours `X-Load-Balancing-Endpoint-Weight` would send nodes traffic in proportion to their ready local endpoints, giving every pod the same share; one that spreads per node (as here, and as most cloud load balancers do) gives the lone pod twice its siblings' share. Tolerance ±%.0f points.\n", strings.Join(ws, ", "), 100*s.Tolerance)
		for _, pr := range s.Problems {
			p("- ✗ %s\n", pr)
		}
	}

	p("\n## Model and kernel\n\n")
	var disagree []string
	for _, row := range rows {
		if len(row.Judged.Problems) > 0 {
			disagree = append(disagree, fmt.Sprintf("%d (%s, %s)", row.Spec.Scenario, policyOf(row), row.Spec.Title))
		}
	}
	if len(disagree) == 0 && len(rows) > 0 {
		p("The kernel and `trafficpolicy.Expect` agreed on every layer of all %d rows.\n", len(rows))
	} else if len(disagree) > 0 {
		p("They disagreed on: %s.\n", strings.Join(disagree, "; "))
	}
	for _, n := range r.notes() {
		p("\n- %s\n", n)
	}
	p("\n## IPv6\n\n")
	if r.IPv6 == "" {
		p("IPv6 clients ran end to end: through the passthrough load balancer (ip6tables DNAT on the load balancer and kube-proxy's rules in ip6tables on the nodes, to IPv6 pod addresses) and through HAProxy (IPv6 frontend, IPv4 to the nodes, the client's IPv6 address carried in the PROXY v2 header). The health check node port counts IPv4 endpoints only, as kube-proxy's primary family's health server does on a dual-stack node.\n")
	} else {
		p("Left out: %s.\n", r.IPv6)
	}
	if f := r.Failures(); len(f) > 0 {
		p("\n## Failed verdicts\n\n")
		for _, l := range f {
			p("- %s\n", l)
		}
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// notes are findings about the model that the run supports.
func (r *Report) notes() []string {
	var out []string
	for _, row := range r.Rows {
		if row.Spec.Deployed == nil || row.Exp.Case.External != trafficpolicy.ExternalCluster ||
			row.Judged.Observed.Outcome != outRefusedPP {
			continue
		}
		if row.Exp.Caveats&trafficpolicy.CaveatNoProxyHeaderFromNode != 0 {
			out = append(out, "Scenario 7 under Cluster: the short-circuited pod arrives from its node (masqueraded) without a PROXY header, and the PROXY listener that trusts the nodes refused it, as the model's `CaveatNoProxyHeaderFromNode` says; ipMode Proxy, or `proxyproto.HeaderlessAllow` with clientip flagging the node as masqueraded, serves it.")
		} else {
			out = append(out, "Scenario 7 under Cluster: the PROXY listener refused the node's headerless connection, but the model does not warn about it (`CaveatNoProxyHeaderFromNode` missing).")
		}
	}
	return out
}
