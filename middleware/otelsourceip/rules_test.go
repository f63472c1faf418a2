package otelsourceip

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
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

// attrSpan is a recording span that keeps the last value set for each
// attribute key, as an SDK span does; the rest is a no-op span.
type attrSpan struct {
	tracenoop.Span
	attrs map[attribute.Key]string
}

func (s *attrSpan) IsRecording() bool { return true }

func (s *attrSpan) SetAttributes(kv ...attribute.KeyValue) {
	for _, a := range kv {
		s.attrs[a.Key] = a.Value.Emit()
	}
}

// peerConn is a TCP connection from peer, as ConnContext sees one.
type peerConn struct {
	net.Conn
	peer netip.AddrPort
}

func (c peerConn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.peer) }
func (c peerConn) LocalAddr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.MustParseAddrPort("192.0.2.1:443"))
}

// Review finding: client.address was corrected only behind the resolve
// middleware (New, RequireClient), whose ObserveResolve sets it. A Policy
// mounted without them (its own Trust, or ConnContext) resolves on its own
// and told the Instrumentation only the rule, so the server span kept
// otelhttp's client.address: the leftmost X-Forwarded-For entry, which the
// client wrote. ObserveDecision sets the client the policy judged, or
// clears it when there is none.
func TestPolicyAloneSetsClientAddress(t *testing.T) {
	in, err := New(WithMeterProvider(metricnoop.NewMeterProvider()), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)
	trust := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
		Masquerade:     clientip.MustParsePrefixSet("192.168.0.0/16"),
	})
	cfg := middleware.PolicyConfig{Default: middleware.Rule{Allow: clientip.MustParsePrefixSet("203.0.113.0/24")}, Observer: in}
	own := cfg
	own.Trust = trust
	withTrust, err := middleware.NewPolicy(own)
	require.NoError(t, err)
	fromConn, err := middleware.NewPolicy(cfg)
	require.NoError(t, err)
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	forms := map[string]struct {
		h       http.Handler
		connCtx bool // the server's ConnContext attached the trust
	}{
		"Handler, own Trust":   {h: withTrust.Handler(ok)},
		"Serve, own Trust":     {h: withTrust.Serve(func(w http.ResponseWriter, r *http.Request, _ clientip.Result, _ error) { ok(w, r) })},
		"Handler, ConnContext": {h: fromConn.Handler(ok), connCtx: true},
	}
	tests := []struct {
		name, peer, xff string
		code            int
		addr, port      string // "" port: none set
	}{
		{"forged leftmost entry, admitted", "10.0.0.2:40000", "6.6.6.6, 203.0.113.7", 200, "203.0.113.7", ""},
		{"forged leftmost entry, refused client still named", "10.0.0.2:40000", "6.6.6.6, 198.51.100.9", 403, "198.51.100.9", ""},
		{"direct client with its port", "203.0.113.9:5000", "6.6.6.6", 200, "203.0.113.9", "5000"},
		{"malformed chain: no client", "10.0.0.2:40000", "6.6.6.6, junk", 400, "", ""},
		{"masquerading node: no client", "10.0.0.2:40000", "6.6.6.6, 192.168.1.10", 403, "", ""},
	}
	for form, f := range forms {
		for _, tc := range tests {
			t.Run(form+"/"+tc.name, func(t *testing.T) {
				span := &attrSpan{attrs: map[attribute.Key]string{"client.address": "6.6.6.6"}} // as otelhttp set it
				ctx := trace.ContextWithSpan(context.Background(), span)
				if f.connCtx {
					ctx = middleware.ConnContext(trust)(ctx, peerConn{peer: netip.MustParseAddrPort(tc.peer)})
				}
				req := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
				req.RemoteAddr = tc.peer
				req.Header.Set("X-Forwarded-For", tc.xff)
				rec := httptest.NewRecorder()
				f.h.ServeHTTP(rec, req)
				assert.Equal(t, tc.code, rec.Code, "status")
				assert.Equal(t, tc.addr, span.attrs["client.address"], "client.address")
				assert.Equal(t, tc.port, span.attrs["client.port"], "client.port")
				assert.Equal(t, "default", span.attrs[RuleKey], "sourceip.rule")
			})
		}
	}
}
