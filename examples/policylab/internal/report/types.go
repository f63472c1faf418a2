// Package report holds what a lab run measured, per kube-proxy mode, and
// writes it as a Markdown report with SVG timelines and traffic-share
// charts beside it.
package report

import (
	"fmt"
	"time"

	"github.com/sourceip/sourceip/examples/policylab/internal/judge"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// Report is the outcome of a lab run: one Mode per kube-proxy mode.
type Report struct {
	Started  time.Time
	Duration time.Duration
	Env      string
	Timing   trafficpolicy.Timing
	Topology string
	IPv6     string // why IPv6 was left out; "" when it ran
	KubeInfo string // how kube-proxy was run
	Modes    []*Mode
	Err      error
}

// Mode is everything measured with one kube-proxy mode.
type Mode struct {
	Name     string // "iptables" or "nftables"
	Duration time.Duration
	Rows     []*Row
	Health   []HealthSnap
	Skew     *Skew
	Windows  []*Window
	Compare  []Comparison
	Drains   []*Drain
}

// Row is one question put to the kernel and to the model.
type Row struct {
	Scenario int
	Title    string // the caller and the address
	LB       string // the load balancer in the path, in words
	Exp      trafficpolicy.Expectation
	Deployed bool // the backend was configured for another path (scenario 7)
	Judged   judge.Judgement
	Conns    int
	Details  []string
	Problems []string
}

// Pass reports whether the row's verdict passed.
func (r *Row) Pass() bool { return len(r.Problems) == 0 }

// Problemf records a failed verdict.
func (r *Row) Problemf(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Detailf records a detail.
func (r *Row) Detailf(format string, args ...any) {
	r.Details = append(r.Details, fmt.Sprintf(format, args...))
}

// Policy names the policy that governs the row.
func (r *Row) Policy() string {
	if r.Exp.Case.Path == trafficpolicy.PathClusterIP {
		return "internal " + r.Exp.Case.Internal.String()
	}
	return r.Exp.Case.External.String()
}

// key identifies the row across modes.
func (r *Row) key() string { return fmt.Sprintf("%d|%s|%s", r.Scenario, r.Policy(), r.Title) }

// HealthSnap is one node's health answer as the load balancer gets it.
type HealthSnap struct {
	Node   string
	Code   int
	Weight string
	Err    error
}

// SkewPod is one pod's share of the skew measurement.
type SkewPod struct {
	Pod, Node string
	Count     int
	Share     float64 // measured
	Even      float64 // what even spreading over nodes gives it
	Weighted  float64 // what spreading by the health check's weight header would give it
}

// Skew is scenario 6.
type Skew struct {
	Conns, Delivered int
	Members          []string
	Pods             []SkewPod
	Health           []HealthSnap
	Tolerance        float64
	Problems         []string
}

// Pass reports whether the skew verdict passed.
func (s *Skew) Pass() bool { return len(s.Problems) == 0 }

// Window is one measured membership transition of scenario 5.
type Window struct {
	Name, Event, Node string
	Try               int  // 1, or 2 for the re-run of a window whose first try failed
	WantUp            bool // the node joins (rejoin) rather than leaves
	Model             string
	Predicted         trafficpolicy.Window
	Expect            trafficpolicy.Expectation
	Allowed           trafficpolicy.Window
	Margin            string // how the allowed window was widened, in words

	// kube-proxy syncs each IP family on its own; the health answer changes
	// with the sync of the family whose proxier holds the port
	// (kubernetes#114702), somewhere between the first and the last.
	FirstSync   time.Duration // the change → the first family's sync done
	Sync        time.Duration // the change → the last family's sync done (rules and health answer)
	FirstSaw    time.Duration // the prober's first round of the streak, from the first sync (0 when it was under way then)
	Crossed     time.Duration // the round that crossed the threshold, from the first sync: the load balancer's decision
	Applied     time.Duration // the sync → the load balancer's rules rebuilt
	Propagation time.Duration // the decision → the rules rebuilt
	Unanswered  int           // probes of the node without an answer in time while the prober decided

	Attempts, InWindow, Failures, Outside int
	LastFail                              time.Duration
	Kinds                                 judge.Tally
	ServedOn, ServedAfter                 int
	Errors                                []string
	Problems                              []string

	Timeline Timeline
}

// Pass reports whether the window's verdict passed.
func (w *Window) Pass() bool { return len(w.Problems) == 0 }

// Timeline is what a window's SVG shows, as offsets from the change.
type Timeline struct {
	FirstSync, Sync  time.Duration
	Decided, Applied time.Duration
	End              time.Duration
	Probes           []ProbeMark
	Member           []Span // when the load balancer had the node as a member
	Conns            []ConnMark
}

// ProbeMark is one health probe of the window's node.
type ProbeMark struct {
	At   time.Duration
	Code int // 0: no answer in time
}

// Span is a stretch of time.
type Span struct{ From, To time.Duration }

// ConnMark is one connection of the window's load.
type ConnMark struct {
	At      time.Duration
	Worker  int
	Outcome string // "node" (served on the window's node), "other" (served elsewhere), "failed"
}

// Comparison is one live comparison of a kube-proxy health answer with the
// project's server's answer to the same request on the same node.
type Comparison struct {
	Node, Moment, What string
	KubeProxy, Own     Answer
	Equal              bool
	Diff               string
}

// Answer is an HTTP answer, as compared.
type Answer struct {
	Code    int
	Headers string // every header but Date, sorted, one "Name: value" a line
	Body    string
	Err     string
}

// Drain is scenario 8: a node marked for deletion under Cluster.
type Drain struct {
	Node, Event    string
	KubeProxy, Own int // /healthz status codes
	WantUp         bool
	Decided        time.Duration // the change → the prober's decision
	HAProxy        string        // HAProxy's view of the node afterwards
	Problems       []string
}

// Pass reports whether the drain's verdict passed.
func (d *Drain) Pass() bool { return len(d.Problems) == 0 }
