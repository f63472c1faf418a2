package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/middleware/otelsourceip"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientAddressOverwritten pins that the span a request ends with never
// keeps a client.address the client wrote: the test pre-sets client.address
// on the server span to the leftmost X-Forwarded-For entry, as otelhttp
// does, runs the resolve middleware with the Instrumentation as Observer, and
// reads the ended span from the SDK's in-memory recorder. It lives in the
// examples module, which may depend on the OpenTelemetry SDK; the library
// depends on the API only.
func TestClientAddressOverwritten(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	inst, err := otelsourceip.New(otelsourceip.WithTracerProvider(tp))
	require.NoError(t, err)
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
		Masquerade:     clientip.MustParsePrefixSet("192.0.2.0/24"),
	})
	resolve, err := middleware.New(middleware.Config{Trust: r, Observer: inst})
	require.NoError(t, err)
	h := resolve(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	tests := []struct {
		name, xff, outcome string
		address            string // the final client.address
		masqueraded        bool
	}{
		{name: "resolved", xff: "6.6.6.6, 203.0.113.7", outcome: "resolved", address: "203.0.113.7"},
		{name: "masqueraded", xff: "6.6.6.6, 192.0.2.5", outcome: "masqueraded", address: "", masqueraded: true},
		{name: "failure", xff: "6.6.6.6, junk", outcome: "malformed", address: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = "10.0.0.2:40000"
			req.Header.Set("X-Forwarded-For", tc.xff)
			ctx, span := tp.Tracer("otelhttp-like").Start(req.Context(), "server")
			span.SetAttributes(semconv.ClientAddress("6.6.6.6")) // what otelhttp sets
			h.ServeHTTP(httptest.NewRecorder(), req.WithContext(ctx))
			span.End()

			spans := sr.Ended()
			attrs := spans[len(spans)-1].Attributes()
			got, ok := lookup(attrs, semconv.ClientAddressKey)
			assert.True(t, ok, "client.address present")
			assert.Equal(t, tc.address, got.AsString(), "client.address")
			got, _ = lookup(attrs, otelsourceip.OutcomeKey)
			assert.Equal(t, tc.outcome, got.AsString(), "sourceip.outcome")
			got, _ = lookup(attrs, otelsourceip.MasqueradedKey)
			assert.Equal(t, tc.masqueraded, got.AsBool(), "sourceip.masqueraded")
			got, _ = lookup(attrs, semconv.NetworkPeerAddressKey)
			assert.Equal(t, "10.0.0.2", got.AsString(), "network.peer.address: the socket peer")
			for _, kv := range attrs {
				assert.NotEqual(t, "6.6.6.6", kv.Value.AsString(), "%s keeps the client-written address", kv.Key)
			}
		})
	}
}

// lookup returns the last value of k in kvs, as the SDK keeps the last value
// set for a key.
func lookup(kvs []attribute.KeyValue, k attribute.Key) (attribute.Value, bool) {
	var v attribute.Value
	var ok bool
	for _, kv := range kvs {
		if kv.Key == k {
			v, ok = kv.Value, true
		}
	}
	return v, ok
}
