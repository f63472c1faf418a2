package otelsourceip

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// PolicyDecisionsName is the name of the counter of a policy's decisions.
const PolicyDecisionsName = "sourceip.policy.decisions"

// RuleKey is the name of the middleware.Policy rule that decided: one of
// the policy's configured rule names, "" for a target no rule can judge (an
// invalid MQTT topic), or [OverflowRule]. Spans and metrics: rule names are
// configuration, so their number is bounded.
const RuleKey = attribute.Key("sourceip.rule")

// OverflowRule is the sourceip.rule value of every rule name beyond the
// first [MaxRules] an Instrumentation sees, so that a caller that makes up
// rule names cannot grow the metrics without bound.
const OverflowRule = "_overflow"

// MaxRules is how many distinct rule names an Instrumentation labels
// metrics with.
const MaxRules = 256

// verdicts are the outcomes a policy decision has, in the order of the
// measurement options built for each rule; anything else counts as the last.
var verdicts = [...]middleware.Outcome{
	middleware.OutcomeResolved,
	middleware.OutcomeNotAllowed,
	middleware.OutcomeUnresolved,
	middleware.OutcomeMasqueraded,
	middleware.OutcomeError,
}

func verdictIndex(o middleware.Outcome) int {
	for i, v := range verdicts {
		if v == o {
			return i
		}
	}
	return len(verdicts) - 1
}

// ruleOpts are the measurement options of one rule, built the first time
// the rule is seen.
type ruleOpts struct {
	deny     [][len(verdicts)][]metric.AddOption // [source][verdict]
	decision [len(verdicts)][]metric.AddOption
	span     attribute.KeyValue
}

// rules holds the ruleOpts of each rule name seen, at most MaxRules of them.
type rules struct {
	byName   sync.Map // string -> *ruleOpts
	n        atomic.Int32
	overflow *ruleOpts
}

func newRuleOpts(name string) *ruleOpts {
	rule := RuleKey.String(name)
	ro := &ruleOpts{deny: make([][len(verdicts)][]metric.AddOption, numSources), span: rule}
	for v, o := range verdicts {
		out := o.String()
		ro.decision[v] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(rule, OutcomeKey.String(out)))}
		for s := range numSources {
			src := SourceKey.String(clientip.Source(s).String())
			ro.deny[s][v] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(rule, src, ReasonKey.String(out)))}
		}
	}
	return ro
}

// of returns the options of the rule named name.
func (rs *rules) of(name string) *ruleOpts {
	if v, ok := rs.byName.Load(name); ok {
		return v.(*ruleOpts)
	}
	if rs.n.Add(1) > MaxRules {
		rs.n.Add(-1)
		return rs.overflow
	}
	v, loaded := rs.byName.LoadOrStore(name, newRuleOpts(name))
	if loaded {
		rs.n.Add(-1)
	}
	return v.(*ruleOpts)
}

// ObserveDecision records one decision of a middleware.Policy, admitted or
// refused: it counts it in sourceip.policy.decisions by sourceip.rule and
// sourceip.outcome ("resolved" for an admission, or the verdict:
// "not_allowed", "unresolved", "masqueraded") and, when ctx carries a
// recording span, sets on it sourceip.rule and the client the policy judged
// as client.address (and client.port when res's layer carries one; the
// empty client.address for a client that was not resolved or is
// masqueraded), as [SpanAttributes] does. A Policy resolves on its own when
// no resolve middleware ran before it, so this is where otelhttp's
// client.address, the leftmost X-Forwarded-For entry, is replaced on that
// path. It implements [middleware.DecisionObserver], so a Policy's Handler
// and Serve call it; code that judges connections with Policy.Decide calls
// it directly. It does not allocate once the rule has been seen, except
// for the attributes of a recording span.
func (in *Instrumentation) ObserveDecision(ctx context.Context, res clientip.Result, d middleware.Decision) {
	ro := in.rules.of(d.Rule)
	in.decisions.Add(ctx, 1, ro.decision[verdictIndex(d.Outcome())]...)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		var buf [3]attribute.KeyValue
		span.SetAttributes(appendClient(append(buf[:0], ro.span), res)...)
	}
}

var _ middleware.DecisionObserver = (*Instrumentation)(nil)
