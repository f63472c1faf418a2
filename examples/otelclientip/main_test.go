package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/middleware/otelsourceip"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type harness struct {
	sr     *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	inst   *otelsourceip.Instrumentation
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{sr: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.sr))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		h.tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	var err error
	h.inst, err = otelsourceip.New(otelsourceip.WithMeterProvider(mp), otelsourceip.WithTracerProvider(h.tp))
	require.NoError(t, err)
	return h
}

// ours renders the attributes this package is responsible for (client.*,
// network.peer.*, sourceip.*, error.type, network.local.*,
// network.transport), sorted, so a comparison catches any extra one.
func ours(kvs []attribute.KeyValue) string {
	var out []string
	for _, kv := range kvs {
		k := string(kv.Key)
		if strings.HasPrefix(k, "client.") || strings.HasPrefix(k, "network.peer.") || strings.HasPrefix(k, "sourceip.") ||
			strings.HasPrefix(k, "network.local.") || k == "network.transport" || k == "error.type" {
			out = append(out, k+"="+kv.Value.String())
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// points renders a counter's data points as "attr=value,attr=value: n", sorted.
func points(t *testing.T, m metricdata.Metrics) []string {
	t.Helper()
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s: data is %T, want an int64 sum", m.Name, m.Data)
	assert.True(t, sum.IsMonotonic, "%s: monotonic", m.Name)
	assert.Equal(t, metricdata.CumulativeTemporality, sum.Temporality, "%s: temporality", m.Name)
	var out []string
	for _, dp := range sum.DataPoints {
		var kv []string
		for _, a := range dp.Attributes.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		out = append(out, fmt.Sprintf("%s: %d", strings.Join(kv, ","), dp.Value))
	}
	slices.Sort(out)
	return out
}

// TestOpenTelemetry drives requests through otelhttp, the resolve middleware
// and a source-range policy, and a refused PROXY connection through a real
// listener, then checks every span attribute and metric point sourceip
// produced against the SDK's in-memory span recorder and manual reader.
func TestOpenTelemetry(t *testing.T) {
	h := newHarness(t)
	r := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
		Masquerade:     clientip.MustParsePrefixSet("192.168.0.0/16"),
	})
	policy, err := middleware.NewSourceRanges(middleware.SourceRangesConfig{
		Allow: clientip.MustParsePrefixSet("198.51.100.0/24"), Observer: h.inst,
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	mux.Handle("/", ok)
	mux.Handle("/admin", policy.Handler(ok))
	handler, err := newHandler(mux, r, h.inst, h.tp)
	require.NoError(t, err)

	requests := []struct {
		name  string
		path  string
		peer  string
		xff   string
		code  int
		attrs string
	}{
		{name: "forged leftmost entry", path: "/", peer: "10.0.0.2:40000", xff: "6.6.6.6, 203.0.113.7", code: 200,
			attrs: "client.address=203.0.113.7 network.peer.address=10.0.0.2 network.peer.port=40000 sourceip.header=X-Forwarded-For sourceip.hop=1 sourceip.outcome=resolved sourceip.source=x-forwarded-for sourceip.via=10.0.0.2"},
		{name: "direct client denied", path: "/admin", peer: "203.0.113.9:5000", xff: "198.51.100.7", code: 403,
			attrs: "client.address=203.0.113.9 client.port=5000 network.peer.address=203.0.113.9 network.peer.port=5000 sourceip.hop=0 sourceip.outcome=resolved sourceip.reason=not_allowed sourceip.rule=source-ranges sourceip.source=socket"},
		{name: "malformed chain", path: "/", peer: "10.0.0.2:40000", xff: "198.51.100.7, junk", code: 400,
			// otelhttp's client.address (the leftmost entry, which the client
			// wrote) is cleared: the request was refused and sourceip.outcome
			// says why.
			attrs: "client.address= network.peer.address=10.0.0.2 network.peer.port=40000 sourceip.header=X-Forwarded-For sourceip.hop=1 sourceip.outcome=malformed sourceip.source=none"},
		{name: "masquerading node", path: "/admin", peer: "192.168.1.10:3000", code: 403,
			// A node is not a client: client.address is cleared.
			attrs: "client.address= network.peer.address=192.168.1.10 network.peer.port=3000 sourceip.hop=0 sourceip.masqueraded=true sourceip.outcome=masqueraded sourceip.reason=masqueraded sourceip.rule=source-ranges sourceip.source=socket"},
		{name: "forged entry before a masquerading node", path: "/", peer: "10.0.0.2:40000", xff: "6.6.6.6, 192.168.1.10", code: 200,
			attrs: "client.address= network.peer.address=10.0.0.2 network.peer.port=40000 sourceip.header=X-Forwarded-For sourceip.hop=1 sourceip.masqueraded=true sourceip.outcome=masqueraded sourceip.source=x-forwarded-for sourceip.via=10.0.0.2"},
		{name: "forged entry before garbage", path: "/", peer: "10.0.0.2:40000", xff: "6.6.6.6, junk", code: 400,
			attrs: "client.address= network.peer.address=10.0.0.2 network.peer.port=40000 sourceip.header=X-Forwarded-For sourceip.hop=1 sourceip.outcome=malformed sourceip.source=none"},
		{name: "admitted through two proxies", path: "/admin", peer: "10.0.0.2:40000", xff: "198.51.100.7, 10.0.0.3", code: 200,
			attrs: "client.address=198.51.100.7 network.peer.address=10.0.0.2 network.peer.port=40000 sourceip.header=X-Forwarded-For sourceip.hop=2 sourceip.outcome=resolved sourceip.rule=source-ranges sourceip.source=x-forwarded-for sourceip.via=10.0.0.3"},
	}
	for _, tc := range requests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", tc.path, nil)
			req.RemoteAddr = tc.peer
			if tc.xff != "" {
				req.Header.Set("X-Forwarded-For", tc.xff)
			}
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			assert.Equal(t, tc.code, rec.Code, "status")
			spans := h.sr.Ended()
			s := spans[len(spans)-1]
			assert.Equal(t, trace.SpanKindServer, s.SpanKind(), "last span %q: want otelhttp's server span", s.Name())
			assert.Equal(t, tc.attrs, ours(s.Attributes()), "span attributes")
		})
	}

	// A PROXY header from a peer the listener does not trust.
	rej := make(chan proxyproto.Rejection, 1)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	pl, err := proxyproto.NewListener(inner, proxyproto.Config{
		Trust: clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8")}),
		OnReject: func(r proxyproto.Rejection) {
			h.inst.ObserveProxyRejection(r)
			rej <- r
		},
	})
	require.NoError(t, err)
	defer pl.Close()
	go pl.Accept() // starts the listener's accept loop; returns at Close
	c, err := proxyproto.DialContext(t.Context(), nil, "tcp", pl.Addr().String(), proxyproto.Header{
		Version: 2, Command: proxyproto.CommandProxy,
		Source:      netip.MustParseAddrPort("6.6.6.6:1"),
		Destination: netip.MustParseAddrPort("192.0.2.10:8883"),
	})
	require.NoError(t, err)
	defer c.Close()
	var got proxyproto.Rejection
	select {
	case got = <-rej:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "no rejection reported")
	}
	spans := h.sr.Ended()
	s := spans[len(spans)-1]
	clientPort := c.LocalAddr().(*net.TCPAddr).Port
	localPort := pl.Addr().(*net.TCPAddr).Port
	want := fmt.Sprintf("error.type=untrusted_header network.local.address=127.0.0.1 network.local.port=%d network.peer.address=127.0.0.1 network.peer.port=%d network.transport=tcp sourceip.reason=untrusted_header", localPort, clientPort)
	assert.Equal(t, otelsourceip.RejectSpanName, s.Name(), "reject span")
	assert.Equal(t, trace.SpanKindServer, s.SpanKind(), "reject span")
	assert.False(t, s.Parent().IsValid(), "reject span parent %v", s.Parent())
	assert.Equal(t, codes.Error, s.Status().Code, "reject span status")
	assert.Equal(t, "untrusted_header", s.Status().Description, "reject span status")
	assert.Equal(t, got.Duration, s.EndTime().Sub(s.StartTime()), "reject span lasts the rejection's duration")
	assert.Equal(t, want, ours(s.Attributes()), "reject span attributes")
	assert.Equal(t, otelsourceip.ScopeName, s.InstrumentationScope().Name, "span scope")
	assert.Equal(t, semconv.SchemaURL, s.InstrumentationScope().SchemaURL, "span scope")

	// Every metric point.
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	wantMetrics := map[string][]string{
		otelsourceip.ResolutionsName: {
			"sourceip.outcome=malformed,sourceip.source=none: 2",
			"sourceip.outcome=masqueraded,sourceip.source=socket: 1",
			"sourceip.outcome=masqueraded,sourceip.source=x-forwarded-for: 1",
			"sourceip.outcome=resolved,sourceip.source=socket: 1",
			"sourceip.outcome=resolved,sourceip.source=x-forwarded-for: 2",
		},
		otelsourceip.MasqueradeDetectionsName: {"sourceip.source=socket: 1", "sourceip.source=x-forwarded-for: 1"},
		otelsourceip.PolicyDenialsName: {
			"sourceip.reason=masqueraded,sourceip.rule=source-ranges,sourceip.source=socket: 1",
			"sourceip.reason=not_allowed,sourceip.rule=source-ranges,sourceip.source=socket: 1",
		},
		otelsourceip.PolicyDecisionsName: {
			"sourceip.outcome=masqueraded,sourceip.rule=source-ranges: 1",
			"sourceip.outcome=not_allowed,sourceip.rule=source-ranges: 1",
			"sourceip.outcome=resolved,sourceip.rule=source-ranges: 1",
		},
		otelsourceip.ProxyRejectionsName: {"sourceip.reason=untrusted_header: 1"},
	}
	wantUnits := map[string]string{
		otelsourceip.ResolutionsName:          "{resolution}",
		otelsourceip.MasqueradeDetectionsName: "{detection}",
		otelsourceip.PolicyDenialsName:        "{denial}",
		otelsourceip.PolicyDecisionsName:      "{decision}",
		otelsourceip.ProxyRejectionsName:      "{connection}",
	}
	var found int
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelsourceip.ScopeName {
			continue
		}
		assert.Equal(t, semconv.SchemaURL, sm.Scope.SchemaURL, "metric scope schema")
		for _, m := range sm.Metrics {
			found++
			want, ok := wantMetrics[m.Name]
			if !assert.True(t, ok, "unexpected metric %s", m.Name) {
				continue
			}
			assert.Equal(t, wantUnits[m.Name], m.Unit, "%s: unit", m.Name)
			assert.NotEmpty(t, m.Description, "%s: description", m.Name)
			assert.Equal(t, want, points(t, m), "%s points", m.Name)
		}
	}
	assert.Equal(t, len(wantMetrics), found, "sourceip metrics found")
}

// TestOtelhttpPitfall pins the behaviour the package documentation warns
// about: otelhttp alone names the leftmost X-Forwarded-For entry.
func TestOtelhttpPitfall(t *testing.T) {
	h := newHarness(t)
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.0.0.2:40000"
	req.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7")
	newPlainHandler(http.NotFoundHandler(), h.tp).ServeHTTP(httptest.NewRecorder(), req)
	spans := h.sr.Ended()
	assert.Equal(t, "6.6.6.6", attr(spans[len(spans)-1].Attributes(), semconv.ClientAddressKey),
		"otelhttp's client.address: if otelhttp stopped trusting the leftmost entry, update the docs")
}

// TestPolicyAloneCorrectsOtelhttp: a Policy mounted inside otelhttp without
// the resolve middleware (here with its own Trust) replaces otelhttp's
// client.address, the leftmost X-Forwarded-For entry, with the client it
// judged, admitted or refused, and clears it when there is none. Before,
// only the resolve middleware's ObserveResolve set it, and this path kept
// the forged entry.
func TestPolicyAloneCorrectsOtelhttp(t *testing.T) {
	h := newHarness(t)
	policy, err := middleware.NewPolicy(middleware.PolicyConfig{
		Default: middleware.Rule{Allow: clientip.MustParsePrefixSet("203.0.113.0/24")},
		Trust: clientip.MustNew(clientip.Config{
			TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
			Header:         "X-Forwarded-For",
		}),
		Observer: h.inst,
	})
	require.NoError(t, err)
	handler := newPlainHandler(policy.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), h.tp)
	for _, tc := range []struct {
		name, xff string
		code      int
		want      string
	}{
		{"admitted", "6.6.6.6, 203.0.113.7", 200, "203.0.113.7"},
		{"refused", "6.6.6.6, 198.51.100.9", 403, "198.51.100.9"},
		{"malformed chain", "6.6.6.6, junk", 400, ""},
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "10.0.0.2:40000"
		req.Header.Set("X-Forwarded-For", tc.xff)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		assert.Equal(t, tc.code, rec.Code, tc.name)
		spans := h.sr.Ended()
		s := spans[len(spans)-1]
		assert.Equal(t, tc.want, attr(s.Attributes(), semconv.ClientAddressKey), tc.name)
		assert.Equal(t, "default", attr(s.Attributes(), otelsourceip.RuleKey), tc.name)
	}
}

// TestObserveAllocsSDK measures recording into the SDK: counters with cached
// attribute sets, and span attributes only when a span records.
func TestObserveAllocsSDK(t *testing.T) {
	h := newHarness(t)
	res := clientip.Result{Client: netip.MustParseAddr("203.0.113.7"), Source: clientip.SourceXForwardedFor, Hop: 1,
		Peer: netip.MustParseAddrPort("10.0.0.2:40000"), Via: netip.MustParseAddr("10.0.0.2"), Header: "X-Forwarded-For"}
	ctx := context.Background()
	n := testing.AllocsPerRun(200, func() { h.inst.ObserveResolve(ctx, res, nil) })
	t.Logf("ObserveResolve without a span: %v allocs", n)
	assert.Zero(t, n, "counting a resolution allocates")
	ctx, span := h.tp.Tracer("test").Start(ctx, "server")
	defer span.End()
	t.Logf("ObserveResolve on a recording span: %v allocs", testing.AllocsPerRun(200, func() { h.inst.ObserveResolve(ctx, res, nil) }))
}

func Example() {
	main()
	// Output:
	// otelhttp alone       client.address=6.6.6.6
	// otelhttp + sourceip  client.address=203.0.113.7
}
