package otelsourceip

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// A policy's Handler reports each decision with its rule, and each denial
// with its rule beside the reason and source.
func TestPolicyRuleAttribute(t *testing.T) {
	p := &recording{}
	in, err := New(WithMeterProvider(p), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)
	policy, err := middleware.NewPolicy(middleware.PolicyConfig{
		Targets:  middleware.TargetNames,
		Rules:    []middleware.Rule{{Name: "admin", Target: "/admin/*", Allow: clientip.MustParsePrefixSet("198.51.100.0/24")}},
		Default:  middleware.Rule{Name: "public", Allow: clientip.MustParsePrefixSet("0.0.0.0/0")},
		Route:    func(r *http.Request) string { return r.URL.Path },
		Trust:    clientip.MustNew(clientip.Config{}),
		Observer: in,
	})
	require.NoError(t, err)
	h := policy.Handler(http.NotFoundHandler())
	for _, tc := range []struct {
		peer, path string
		want       []string
	}{
		{"198.51.100.7:1", "/admin/x", []string{PolicyDecisionsName + " sourceip.outcome=resolved sourceip.rule=admin"}},
		{"203.0.113.9:1", "/admin/x", []string{
			PolicyDecisionsName + " sourceip.outcome=not_allowed sourceip.rule=admin",
			PolicyDenialsName + " sourceip.reason=not_allowed sourceip.rule=admin sourceip.source=socket"}},
		{"203.0.113.9:1", "/x", []string{PolicyDecisionsName + " sourceip.outcome=resolved sourceip.rule=public"}},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		req.RemoteAddr = tc.peer
		h.ServeHTTP(httptest.NewRecorder(), req)
		assert.Equal(t, tc.want, p.take(), "%s %s", tc.peer, tc.path)
	}

	// A denial that names no rule is counted as before.
	in.ObserveDeny(context.Background(), clientip.Result{}, middleware.ErrNotAllowed)
	assert.Equal(t, []string{PolicyDenialsName + " sourceip.reason=not_allowed sourceip.source=none"}, p.take())
}

// Rule names beyond MaxRules are counted under OverflowRule.
func TestPolicyRuleOverflow(t *testing.T) {
	p := &recording{}
	in, err := New(WithMeterProvider(p), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)
	ctx := context.Background()
	for i := range MaxRules {
		in.ObserveDecision(ctx, clientip.Result{}, middleware.Decision{Rule: fmt.Sprintf("r%d", i)})
	}
	p.take()
	in.ObserveDecision(ctx, clientip.Result{}, middleware.Decision{Rule: "one-too-many"})
	in.ObserveDecision(ctx, clientip.Result{}, middleware.Decision{Rule: "r7"})
	assert.Equal(t, []string{
		PolicyDecisionsName + " sourceip.outcome=resolved sourceip.rule=" + OverflowRule,
		PolicyDecisionsName + " sourceip.outcome=resolved sourceip.rule=r7",
	}, p.take())
}

// An Instrumentation is safe for concurrent use, as documented, also while
// goroutines race to see rule names first: every decision is counted once,
// under its own rule or OverflowRule, and no more than MaxRules names label
// the counter. Run with -race.
func TestPolicyRuleConcurrent(t *testing.T) {
	p := &recording{}
	in, err := New(WithMeterProvider(p), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)
	const names, workers = MaxRules + 64, 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range names {
				rule := fmt.Sprintf("r%d", (i+w*37)%names)
				in.ObserveDecision(context.Background(), clientip.Result{}, middleware.Decision{Rule: rule})
			}
		})
	}
	wg.Wait()
	adds := p.take()
	assert.Len(t, adds, names*workers)
	labels := map[string]bool{}
	prefix := PolicyDecisionsName + " sourceip.outcome=resolved sourceip.rule="
	for _, a := range adds {
		require.True(t, strings.HasPrefix(a, prefix), a)
		labels[strings.TrimPrefix(a, prefix)] = true
	}
	assert.True(t, labels[OverflowRule], "names beyond MaxRules are counted under OverflowRule")
	delete(labels, OverflowRule)
	assert.LessOrEqual(t, len(labels), MaxRules)
}

func TestObserveDecisionAllocs(t *testing.T) {
	in, err := New(WithMeterProvider(metricnoop.NewMeterProvider()), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)
	ctx := context.Background()
	res := clientip.Result{Client: netip.MustParseAddr("203.0.113.7"), Source: clientip.SourceSocket}
	denial := &middleware.Denial{Rule: "admin", Verdict: middleware.ErrNotAllowed}
	in.ObserveDeny(ctx, res, denial) // the rule's options are built the first time
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		in.ObserveDecision(ctx, res, middleware.Decision{Rule: "admin", Err: denial})
		in.ObserveDeny(ctx, res, denial)
	}))
}
