package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/ratelimit"
)

// TestRateLimitClientAddress: a server whose only sourceip middleware is
// ratelimit.HTTP, inside the real otelhttp handler and SDK. Without an
// Observer the server span keeps otelhttp's client.address, the leftmost
// X-Forwarded-For entry the client wrote; with the Instrumentation as
// HTTPConfig.Observer it names the client the limiter keyed on.
func TestRateLimitClientAddress(t *testing.T) {
	hn := newHarness(t)
	sr, tp, inst := hn.sr, hn.tp, hn.inst
	trust := clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"), Header: "X-Forwarded-For"})

	for _, tc := range []struct {
		name     string
		observer middleware.Observer
		want     string
	}{
		{"without Observer: otelhttp's leftmost entry stays", nil, "6.6.6.6"},
		{"with the Instrumentation: the resolved client", inst, "203.0.113.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := ratelimit.New(ratelimit.Config{Limit: ratelimit.Limit{Rate: 1e9, Burst: 100}})
			require.NoError(t, err)
			lim, err := ratelimit.NewHTTP(ratelimit.HTTPConfig{Trust: trust, Store: store, Observer: tc.observer})
			require.NoError(t, err)
			h := otelhttp.NewHandler(lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), "server",
				otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))

			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = "10.0.0.2:40000"
			req.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, http.StatusOK, rec.Code)

			spans := sr.Ended()
			require.NotEmpty(t, spans)
			got, ok := lookup(spans[len(spans)-1].Attributes(), semconv.ClientAddressKey)
			assert.True(t, ok, "client.address present")
			assert.Equal(t, tc.want, got.AsString(), "client.address")
		})
	}
}
