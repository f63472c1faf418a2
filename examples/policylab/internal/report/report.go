package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sourceip/sourceip/examples/policylab/internal/judge"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// Passed reports whether the lab ran to the end in every mode and every
// verdict passed. A window transition passes when its last try passed.
func (r *Report) Passed() bool { return len(r.Failures()) == 0 }

// lastTries returns, for each transition, its last try.
func lastTries(ws []*Window) []*Window {
	var out []*Window
	for i, w := range ws {
		if i+1 < len(ws) && ws[i+1].Name == w.Name {
			continue
		}
		out = append(out, w)
	}
	return out
}

// Failures lists every failed verdict, one line each.
func (r *Report) Failures() []string {
	var out []string
	if r.Err != nil {
		out = append(out, "run: "+r.Err.Error())
	}
	if len(r.Modes) == 0 {
		out = append(out, "run: no kube-proxy mode ran")
	}
	for _, m := range r.Modes {
		switch {
		case m.Skew == nil:
			out = append(out, m.Name+": scenario 6: the traffic shares were not measured")
		case len(m.Windows) == 0:
			out = append(out, m.Name+": scenario 5: no drain or rejoin window was measured")
		case len(m.Compare) == 0:
			out = append(out, m.Name+": no health answer was compared with kube-proxy's")
		}
		for _, row := range m.Rows {
			for _, p := range row.Problems {
				out = append(out, fmt.Sprintf("%s: scenario %d (%s, %s): %s", m.Name, row.Scenario, row.Policy(), row.Title, p))
			}
		}
		if m.Skew != nil {
			for _, p := range m.Skew.Problems {
				out = append(out, m.Name+": scenario 6: "+p)
			}
		}
		for _, w := range lastTries(m.Windows) {
			for _, p := range w.Problems {
				out = append(out, fmt.Sprintf("%s: scenario 5 (%s): %s", m.Name, w.Name, p))
			}
		}
		for _, d := range m.Drains {
			for _, p := range d.Problems {
				out = append(out, fmt.Sprintf("%s: scenario 8 (%s %s): %s", m.Name, d.Node, d.Event, p))
			}
		}
		for _, c := range m.Compare {
			if !c.Equal {
				out = append(out, fmt.Sprintf("%s: health answers differ on %s after %s (%s): %s", m.Name, c.Node, c.Moment, c.What, c.Diff))
			}
		}
	}
	return out
}

// Ms prints a duration in milliseconds. A negative duration, which no
// measurement here should produce, prints as "< 0 ms" rather than as a
// number that reads like a time travel.
func Ms(d time.Duration) string {
	if d < 0 {
		return "< 0 ms"
	}
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}

func window(w trafficpolicy.Window) string { return Ms(w.Min) + " – " + Ms(w.Max) }

// VerdictWord is PASS or FAIL.
func VerdictWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func layersCell(l judge.Layers) string {
	return strings.Join([]string{l.Outcome, l.Peer, l.Proxy, l.Survives, l.ClientIP}, " · ")
}

// modeCell says whether the kernel agreed with the model on every layer,
// and where not, what it showed.
func modeCell(row *Row) string {
	if row == nil {
		return "not run"
	}
	o, e := row.Judged.Observed, row.Judged.Expected
	var diff []string
	for _, c := range []struct{ name, got, want string }{
		{"outcome", o.Outcome, e.Outcome}, {"peer", o.Peer, e.Peer}, {"PROXY", o.Proxy, e.Proxy},
		{"survives", o.Survives, e.Survives}, {"clientip", o.ClientIP, e.ClientIP},
	} {
		if c.got != c.want {
			diff = append(diff, c.name+": **"+c.got+"**")
		}
	}
	switch {
	case len(diff) > 0:
		return "✗ " + strings.Join(diff, "; ")
	case !row.Pass():
		return "✓ layers, ✗ " + strings.Join(row.Problems, "; ")
	}
	return "✓"
}

// Markdown writes the report. svgs names the SVG files written beside it
// (see [Report.SVGs]); their links are relative.
func (r *Report) Markdown(w io.Writer, svgs map[string]string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# policylab report\n\n")
	p("%s. Run %s, took %.1f s. Verdict: **%s**.\n\n", r.Env, r.Started.UTC().Format(time.RFC3339), r.Duration.Seconds(), VerdictWord(r.Passed()))
	if r.KubeInfo != "" {
		p("%s\n\n", r.KubeInfo)
	}
	var names []string
	for _, m := range r.Modes {
		names = append(names, fmt.Sprintf("%s %.1f s", m.Name, m.Duration.Seconds()))
	}
	if len(names) > 0 {
		p("Every scenario ran once per kube-proxy mode, on a lab built afresh for each: %s.\n\n", strings.Join(names, ", "))
	}
	t := r.Timing
	p("Both load balancers health-check every %s (timeout %s), take a node out after %d failures and back after %d successes: the trafficpolicy prober for the passthrough load balancer, HAProxy's `inter`/`timeout check`/`fall`/`rise` for the full proxy. The model predicts a black hole of %s and a rejoin delay of %s (`Timing.BlackHole`, `Timing.Rejoin`).\n\n",
		Ms(t.Interval), Ms(t.Timeout), t.Fall, t.Rise, window(t.BlackHole()), window(t.Rejoin()))
	if r.Err != nil {
		p("**The lab did not run to the end:** %s\n\n", r.Err)
	}
	if r.Topology != "" {
		p("## Topology\n\n```text\n%s```\n\n", r.Topology)
	}
	r.rows(p)
	r.comparisons(p)
	r.windows(p, svgs)
	r.skew(p, svgs)
	r.drains(p)
	r.model(p)
	p("\n## IPv6\n\n")
	if r.IPv6 == "" {
		p("IPv6 clients ran end to end: through the passthrough load balancer (ip6tables DNAT on the load balancer and kube-proxy's IPv6 proxier on the nodes, to IPv6 pod addresses) and through HAProxy (IPv6 frontend, IPv4 to the nodes, the client's IPv6 address carried in the PROXY v2 header). kube-proxy's two proxiers each open the health check node port; one of them gets it (kubernetes#114702), and as every pod has both families, both count the same endpoints.\n")
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

type printer func(format string, args ...any)

// rows writes the main table: the model's answer once, then a column per
// mode saying whether the kernel agreed.
func (r *Report) rows(p printer) {
	if len(r.Modes) == 0 {
		return
	}
	p("## What the backend observed, layer by layer\n\n")
	p("Each row is one `trafficpolicy.Case`. The echo backend reports, per connection, its socket peer, the PROXY header a trusted upstream sent, and clientip's answer with the configuration `Expectation.Config` gives for that case (a PROXY listener trusting the same hops when the path carries a header). The *model* column is `trafficpolicy.Expect`'s answer, layer by layer: outcome · socket peer · PROXY header · where the client survives · clientip. A mode's column shows ✓ when the kernel, with kube-proxy in that mode, showed the same on every layer for every connection of the row, and what it showed instead where not. \"client\" is the caller's own address, compared per connection.\n\n")
	hdr := "| # | policy | caller → address | load balancer | model |"
	sep := "|---|---|---|---|---|"
	for _, m := range r.Modes {
		hdr += " " + m.Name + " |"
		sep += "---|"
	}
	p("%s\n%s\n", hdr, sep)
	byKey := make([]map[string]*Row, len(r.Modes))
	var order []*Row
	seen := map[string]bool{}
	for i, m := range r.Modes {
		byKey[i] = map[string]*Row{}
		for _, row := range m.Rows {
			byKey[i][row.key()] = row
			if !seen[row.key()] {
				seen[row.key()] = true
				order = append(order, row)
			}
		}
	}
	slices.SortStableFunc(order, func(a, b *Row) int { return a.Scenario - b.Scenario })
	for _, row := range order {
		p("| %d | %s | %s | %s | %s |", row.Scenario, row.Policy(), row.Title, row.LB, layersCell(row.Judged.Expected))
		for i := range r.Modes {
			p(" %s |", modeCell(byKey[i][row.key()]))
		}
		p("\n")
	}
	p("\nDetails:\n\n")
	for _, row := range order {
		p("- **%d, %s, %s**. Model: %s\n", row.Scenario, row.Policy(), row.Title, row.Exp.String())
		for i, m := range r.Modes {
			mr := byKey[i][row.key()]
			if mr == nil {
				continue
			}
			peers := strings.Join(mr.Judged.Peers, ", ")
			if peers == "" {
				peers = "none"
			}
			p("  - %s (%d connections): kernel %s; socket peers %s", m.Name, mr.Conns, layersCell(mr.Judged.Observed), peers)
			for _, d := range mr.Details {
				p("; %s", d)
			}
			p(".\n")
			for _, pr := range mr.Problems {
				p("    - ✗ %s\n", pr)
			}
		}
	}
}

// comparisons summarises the live comparisons of the health servers.
func (r *Report) comparisons(p printer) {
	if len(r.Modes) == 0 {
		return
	}
	p("\n## kube-proxy's health servers and trafficpolicy's, answer for answer\n\n")
	p("On every node the project's `trafficpolicy.HealthServer` (fed by a `Registry` kept from the same EndpointSlices kube-proxy gets) and `trafficpolicy.NodeHealthServer` (per-family `Updated` when kube-proxy's sync of that family ends, the node's state from the same Node object) run beside kube-proxy's health check node port and :10256. After every change kube-proxy synced (the Service, each change of endpoints) and every change of the Node, the load balancer's namespace asks both the same request, and the answers are compared byte for byte: status, every header but `Date`, and the body. The node health bodies carry the time of the answer and of each family's last sync, which two processes cannot share: those RFC 3339 values are compared as `<time>` (and must be present and parse); everything else, byte for byte.\n\n")
	p("| mode | comparisons | identical | answers seen (kube-proxy) |\n|---|---|---|---|\n")
	for _, m := range r.Modes {
		eq := 0
		kinds := judge.Tally{}
		for _, c := range m.Compare {
			if c.Equal {
				eq++
			}
			kinds.Add(fmt.Sprintf("%s %d", c.What, c.KubeProxy.Code))
		}
		var parts []string
		for _, k := range kinds.Keys {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, kinds.N[k]))
		}
		p("| %s | %d | %d | %s |\n", m.Name, len(m.Compare), eq, strings.Join(parts, ", "))
	}
	for _, m := range r.Modes {
		for _, c := range m.Compare {
			if !c.Equal {
				p("\n- ✗ %s, %s after %s, %s: %s\n  - kube-proxy: %d `%s`\n  - trafficpolicy: %d `%s`\n", m.Name, c.Node, c.Moment, c.What, c.Diff,
					c.KubeProxy.Code, oneLine(c.KubeProxy.Body), c.Own.Code, oneLine(c.Own.Body))
			}
		}
	}
	if len(r.Modes) > 0 && len(r.Modes[0].Compare) > 0 {
		p("\nExamples of the compared answers (%s):\n\n", r.Modes[0].Name)
		shown := map[string]bool{}
		for _, c := range r.Modes[0].Compare {
			k := fmt.Sprintf("%s %d", c.What, c.KubeProxy.Code)
			if shown[k] {
				continue
			}
			shown[k] = true
			p("- %s, %s after %s: %d\n\n```text\n%s\n%s\n```\n\n", c.What, c.Node, c.Moment, c.KubeProxy.Code, c.KubeProxy.Headers, c.KubeProxy.Body)
		}
	}
}

func oneLine(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\n", "⏎"), "\t", " ")
}

func (r *Report) windows(p printer, svgs map[string]string) {
	found := false
	for _, m := range r.Modes {
		found = found || len(m.Windows) > 0
	}
	if !found {
		return
	}
	p("\n## Scenario 5: pod removal under Local, the black-hole window\n\n")
	p("Load: %d workers, each starting a connection through the passthrough load balancer every %s (connect timeout %s), from both clients, before, during and after each change to n2's only pod. *Sync* is how long n2's kube-proxy took to sync the changed EndpointSlices, first family / last family: each IP family's proxier syncs on its own, rules and health answer in one sync, and the health check node port belongs to one of them (kubernetes#114702), so the model's window starts between the two. The prober's times are the starts of its rounds, from the end of the first family's sync: the first that saw the new answer (0 when the round was already under way then), and the one that crossed fall (rise) and so *decided*, the moment `Timing.BlackHole` (`Timing.Rejoin`) predicts. It is asserted against the model's window widened by one interval below and, above, by one interval plus the larger of %s and twice the slowest probe answer seen in the window (a busy machine answers late), plus the time between the two families' syncs, plus one threshold of intervals per probe left unanswered. *Rules rebuilt* is when the load balancer's DNAT rules changed, with the propagation delay after the decision in brackets (the model leaves it to the load balancer). Failures count from the change itself until the rules were rebuilt; none may fall outside. A transition whose first try fails is tried once more, and both tries are shown; the last one decides.\n\n",
		LoadWorkers, Ms(LoadPeriod), Ms(LoadConnectTimeout), Ms(WindowSlack))
	p("| mode | transition | try | event | sync | model | prober: first saw / decided | allowed | rules rebuilt | attempts in window | failed (kind) | last failure | verdict | timeline |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.Modes {
		for _, wr := range m.Windows {
			kinds, last := "0", "–"
			if wr.Failures > 0 {
				kinds = fmt.Sprintf("%d (%s)", wr.Failures, wr.Kinds.String())
				last = Ms(wr.LastFail)
			}
			allowedCell := window(wr.Allowed)
			if wr.Margin != "" {
				allowedCell += " (" + wr.Margin + ")"
			}
			link := "–"
			if f, ok := svgs[WindowSVGName(m.Name, wr)]; ok {
				link = "[svg](" + f + ")"
			}
			p("| %s | %s | %d | %s | %s | %s %s | %s / **%s** | %s | %s (+%s) | %d | %s | %s | %s | %s |\n", m.Name, wr.Name, wr.Try, wr.Event, Ms(wr.FirstSync)+" / "+Ms(wr.Sync), wr.Model, window(wr.Predicted),
				Ms(wr.FirstSaw), Ms(wr.Crossed), allowedCell, Ms(wr.Applied), Ms(wr.Propagation), wr.InWindow, kinds, last, VerdictWord(wr.Pass()), link)
		}
	}
	p("\n")
	for _, m := range r.Modes {
		for _, wr := range m.Windows {
			p("- %s, %s (try %d): model for a connection sent to n2 inside the window: %s, %s.", m.Name, wr.Name, wr.Try, wr.Expect.Outcome, wr.Expect.Rule)
			if wr.WantUp {
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
	for _, m := range r.Modes {
		for _, wr := range m.Windows {
			if f, ok := svgs[WindowSVGName(m.Name, wr)]; ok {
				p("\n![%s, %s, try %d](%s)\n", m.Name, wr.Name, wr.Try, f)
			}
		}
	}
}

func (r *Report) skew(p printer, svgs map[string]string) {
	var have []*Mode
	for _, m := range r.Modes {
		if m.Skew != nil {
			have = append(have, m)
		}
	}
	if len(have) == 0 {
		return
	}
	s0 := have[0].Skew
	p("\n## Scenario 6: skew under Local\n\n")
	p("%d connections through the passthrough load balancer, which spreads evenly over its members (%s); each node spreads over its own pods only (kube-proxy's local endpoints).\n\n", s0.Conns, strings.Join(s0.Members, ", "))
	hdr, sep := "| pod | node | expected (even per node) | by the weight header |", "|---|---|---|---|"
	for _, m := range have {
		hdr += " " + m.Name + " |"
		sep += "---|"
	}
	p("%s\n%s\n", hdr, sep)
	for i, sp := range s0.Pods {
		p("| %s | %s | %.1f %% | %.1f %% |", sp.Pod, sp.Node, 100*sp.Even, 100*sp.Weighted)
		for _, m := range have {
			if i < len(m.Skew.Pods) {
				q := m.Skew.Pods[i]
				ok := abs(q.Share-q.Even) <= m.Skew.Tolerance
				p(" %d (%.1f %%) %s |", q.Count, 100*q.Share, map[bool]string{true: "✓", false: "✗"}[ok])
			}
		}
		p("\n")
	}
	var ws []string
	for _, h := range s0.Health {
		ws = append(ws, fmt.Sprintf("%s: %s (%d)", h.Node, h.Weight, h.Code))
	}
	p("\nWeight headers (kube-proxy's, %s): %s. A load balancer that honours `X-Load-Balancing-Endpoint-Weight` would send nodes traffic in proportion to their ready local endpoints, giving every pod the same share; one that spreads per node (as here, and as most cloud load balancers do) gives the lone pod twice its siblings' share. Tolerance ±%.0f points.\n", have[0].Name, strings.Join(ws, ", "), 100*s0.Tolerance)
	if f, ok := svgs[SkewSVGName]; ok {
		p("\n![traffic shares](%s)\n", f)
	}
	for _, m := range have {
		for _, pr := range m.Skew.Problems {
			p("- ✗ %s: %s\n", m.Name, pr)
		}
	}
}

func (r *Report) drains(p printer) {
	found := false
	for _, m := range r.Modes {
		found = found || len(m.Drains) > 0
	}
	if !found {
		return
	}
	p("\n## Scenario 8: a node marked for deletion under Cluster (KEP-3836)\n\n")
	p("The cluster autoscaler taints a node `ToBeDeletedByClusterAutoscaler` before it deletes it. kube-proxy's :10256/healthz then answers 503 (its /livez stays 200), so load balancers that probe it under Cluster drain the node; `trafficpolicy.NodeHealthServer` must answer the same. The passthrough load balancer's prober and HAProxy probe kube-proxy's :10256 here.\n\n")
	p("| mode | node | event | kube-proxy /healthz | trafficpolicy /healthz | prober decided after | HAProxy | verdict |\n|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.Modes {
		for _, d := range m.Drains {
			p("| %s | %s | %s | %d | %d | %s | %s | %s |\n", m.Name, d.Node, d.Event, d.KubeProxy, d.Own, Ms(d.Decided), d.HAProxy, VerdictWord(d.Pass()))
		}
	}
	for _, m := range r.Modes {
		for _, d := range m.Drains {
			for _, pr := range d.Problems {
				p("- ✗ %s, %s %s: %s\n", m.Name, d.Node, d.Event, pr)
			}
		}
	}
}

func (r *Report) model(p printer) {
	p("\n## Model and kernel\n\n")
	for _, m := range r.Modes {
		var disagree []string
		for _, row := range m.Rows {
			if len(row.Judged.Problems) > 0 {
				disagree = append(disagree, fmt.Sprintf("%d (%s, %s)", row.Scenario, row.Policy(), row.Title))
			}
		}
		switch {
		case len(disagree) > 0:
			p("- %s: they disagreed on %s.\n", m.Name, strings.Join(disagree, "; "))
		case len(m.Rows) > 0:
			p("- %s: the kernel and `trafficpolicy.Expect` agreed on every layer of all %d rows.\n", m.Name, len(m.Rows))
		}
	}
	for _, n := range r.notes() {
		p("\n- %s\n", n)
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
	seen := map[string]bool{}
	for _, m := range r.Modes {
		for _, row := range m.Rows {
			if !row.Deployed || row.Exp.Case.External != trafficpolicy.ExternalCluster || row.Judged.Observed.Outcome != judge.OutRefusedPP {
				continue
			}
			n := "Scenario 7 under Cluster: the PROXY listener refused the node's headerless connection, but the model does not warn about it (`CaveatNoProxyHeaderFromNode` missing)."
			if row.Exp.Caveats&trafficpolicy.CaveatNoProxyHeaderFromNode != 0 {
				n = "Scenario 7 under Cluster: the short-circuited pod arrives from its node (masqueraded) without a PROXY header, and the PROXY listener that trusts the nodes refused it, as the model's `CaveatNoProxyHeaderFromNode` says; ipMode Proxy, or `proxyproto.HeaderlessAllow` with clientip flagging the node as masqueraded, serves it."
			}
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// The window measurement's load, described in the report; the lab uses the
// same values.
const (
	LoadWorkers        = 8
	LoadPeriod         = 40 * time.Millisecond
	LoadConnectTimeout = 900 * time.Millisecond
	// WindowSlack is the least scheduling slack added above the model's
	// window, on top of one probe interval.
	WindowSlack = 150 * time.Millisecond
)
