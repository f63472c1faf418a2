package otelsourceip

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/ratelimit"
)

// Review finding: ratelimit.HTTP resolves the client itself but had no
// Observer, so a server whose only sourceip middleware was the rate limiter
// kept otelhttp's client.address: the leftmost X-Forwarded-For entry, which
// the client wrote. With the Instrumentation as HTTPConfig.Observer the
// span names the client the limiter keyed on, or nobody.
func TestRateLimitSetsClientAddress(t *testing.T) {
	h := observedLimiter(t, ratelimit.HTTPConfig{Trust: clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
		Masquerade:     clientip.MustParsePrefixSet("192.168.0.0/16"),
	})})

	tests := []struct {
		name, peer, xff string
		code            int
		addr, outcome   string
	}{
		{"forged leftmost entry", "10.0.0.2:40000", "6.6.6.6, 203.0.113.7", 200, "203.0.113.7", "resolved"},
		{"direct client", "203.0.113.9:5000", "6.6.6.6", 200, "203.0.113.9", "resolved"},
		{"malformed chain: no client", "10.0.0.2:40000", "6.6.6.6, junk", 400, "", "malformed"},
		{"masquerading node: no client", "10.0.0.2:40000", "6.6.6.6, 192.168.1.10", 200, "", "masqueraded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			span := &attrSpan{attrs: map[attribute.Key]string{"client.address": "6.6.6.6"}} // as otelhttp set it
			req := httptest.NewRequestWithContext(trace.ContextWithSpan(context.Background(), span), "GET", "/", nil)
			req.RemoteAddr = tc.peer
			req.Header.Set("X-Forwarded-For", tc.xff)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, tc.code, rec.Code, "status")
			assert.Equal(t, tc.addr, span.attrs["client.address"], "client.address")
			assert.Equal(t, tc.outcome, span.attrs[OutcomeKey], "sourceip.outcome")
		})
	}
}

// The Observer keeps the limiter's allocation promise: an allowed request
// on a held key, observed by an Instrumentation whose providers record
// nothing (no span in the context), costs no allocation.
func TestRateLimitObserverDoesNotAllocate(t *testing.T) {
	h := observedLimiter(t, ratelimit.HTTPConfig{
		Trust:            clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"), Header: "X-Forwarded-For"}),
		QuietWhenAllowed: true, // httptest's recorder would allocate the fields
	})
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.0.0.2:40000"
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { h.ServeHTTP(rec, req) }))
}

// observedLimiter returns cfg's limiter, with a Limiter that lets the tests'
// load through and an Instrumentation whose providers record nothing as
// Observer, in front of a handler that answers 200.
func observedLimiter(t *testing.T, cfg ratelimit.HTTPConfig) http.Handler {
	t.Helper()
	in, err := New(WithMeterProvider(metricnoop.NewMeterProvider()), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)
	cfg.Observer = in
	cfg.Store, err = ratelimit.New(ratelimit.Config{Limit: ratelimit.Limit{Rate: 1e9, Burst: 100}})
	require.NoError(t, err)
	lim, err := ratelimit.NewHTTP(cfg)
	require.NoError(t, err)
	return lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
}
