package otelsourceip

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
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
