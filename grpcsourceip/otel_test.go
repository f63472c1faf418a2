package grpcsourceip

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/sourceip/sourceip/middleware/otelsourceip"
)

// endedSpans hands each ended span to the test, which waits for it on the
// channel instead of polling.
type endedSpans chan sdktrace.ReadOnlySpan

func (endedSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e endedSpans) OnEnd(s sdktrace.ReadOnlySpan)                 { e <- s }
func (endedSpans) Shutdown(context.Context) error                  { return nil }
func (endedSpans) ForceFlush(context.Context) error                { return nil }

// next returns the next ended span of kind server.
func (e endedSpans) next(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case s := <-e:
			if s.SpanKind().String() == "server" {
				return s
			}
		case <-timeout.C:
			require.FailNow(t, "no server span ended")
		}
	}
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := make(map[attribute.Key]string)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value.Emit() // the last value set for a key wins, as on export
	}
	return m
}

// TestOTel: an otelsourceip.Instrumentation as the Observer sets the same
// attributes on otelgrpc's server span as on otelhttp's — client.address
// from the chain, not from what the client wrote — and counts resolutions
// and policy denials.
func TestOTel(t *testing.T) {
	spans := make(endedSpans, 16)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	inst, err := otelsourceip.New(otelsourceip.WithTracerProvider(tp), otelsourceip.WithMeterProvider(mp))
	require.NoError(t, err)

	srv := startTrusting(t, "X-Forwarded-For", Config{Observer: inst, Policy: sourceRanges(t, "203.0.113.0/24")},
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithMeterProvider(mp))))

	_, err = callUnary(t, dial(t, srv, proxyAddr, nil), "x-forwarded-for", "6.6.6.6, 203.0.113.7")
	require.NoError(t, err)
	got := spanAttrs(spans.next(t))
	for k, v := range map[attribute.Key]string{
		"client.address":       "203.0.113.7",
		"network.peer.address": proxyAddr,
		"sourceip.source":      "x-forwarded-for",
		"sourceip.outcome":     "resolved",
		"sourceip.hop":         "1",
		"sourceip.header":      "X-Forwarded-For",
		"sourceip.via":         proxyAddr,
	} {
		assert.Equal(t, v, got[k], "%s", k)
	}

	_, err = callStream(t, dial(t, srv, clientAddr, nil), "x-forwarded-for", "203.0.113.7")
	wantStatus(t, err, codes.PermissionDenied, "client address refused: not_allowed")
	got = spanAttrs(spans.next(t))
	assert.Equal(t, "127.0.0.3", got["client.address"])
	assert.Equal(t, "socket", got["sourceip.source"])
	assert.Equal(t, "not_allowed", got["sourceip.reason"])

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelsourceip.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is a %T", m.Name, m.Data)
			for _, dp := range sum.DataPoints {
				src, _ := dp.Attributes.Value(otelsourceip.SourceKey)
				key := m.Name + " " + src.AsString()
				if v, ok := dp.Attributes.Value(otelsourceip.OutcomeKey); ok {
					key += " " + v.AsString()
				}
				if v, ok := dp.Attributes.Value(otelsourceip.ReasonKey); ok {
					key += " " + v.AsString()
				}
				counts[key] += dp.Value
			}
		}
	}
	assert.Equal(t, map[string]int64{
		"sourceip.resolutions x-forwarded-for resolved": 1,
		"sourceip.resolutions socket resolved":          1,
		"sourceip.policy.denials socket not_allowed":    1,
	}, counts)
}
