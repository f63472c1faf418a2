package otelsourceip

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func render(kvs []attribute.KeyValue) string {
	var b strings.Builder
	for i, kv := range kvs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(kv.Key))
		b.WriteByte('=')
		b.WriteString(kv.Value.String())
	}
	return b.String()
}

func TestSpanAttributes(t *testing.T) {
	ap := netip.MustParseAddrPort
	a := netip.MustParseAddr
	tests := []struct {
		name string
		res  clientip.Result
		err  error
		want string
	}{
		{name: "socket client",
			res:  clientip.Result{Client: a("203.0.113.9"), Source: clientip.SourceSocket, Peer: ap("203.0.113.9:5000")},
			want: "client.address=203.0.113.9 client.port=5000 network.peer.address=203.0.113.9 network.peer.port=5000 sourceip.source=socket sourceip.outcome=resolved sourceip.hop=0"},
		{name: "PROXY client",
			res: clientip.Result{Client: a("203.0.113.7"), Source: clientip.SourceProxyProtocol, Hop: 1, Via: a("10.0.0.5"),
				Peer: ap("10.0.0.5:41234"), Proxy: ap("203.0.113.7:5555")},
			want: "client.address=203.0.113.7 client.port=5555 network.peer.address=10.0.0.5 network.peer.port=41234 sourceip.source=proxy-protocol sourceip.outcome=resolved sourceip.hop=1 sourceip.via=10.0.0.5 sourceip.proxy.address=203.0.113.7 sourceip.proxy.port=5555"},
		{name: "XFF client has no port",
			res: clientip.Result{Client: a("2001:db8::7"), Source: clientip.SourceXForwardedFor, Header: "X-Forwarded-For", Hop: 2,
				Via: a("10.0.0.3"), Peer: ap("[::ffff:10.0.0.1]:4000")},
			want: "client.address=2001:db8::7 network.peer.address=10.0.0.1 network.peer.port=4000 sourceip.source=x-forwarded-for sourceip.outcome=resolved sourceip.hop=2 sourceip.header=X-Forwarded-For sourceip.via=10.0.0.3"},
		{name: "masqueraded node is not a client",
			res:  clientip.Result{Client: a("192.168.1.10"), Source: clientip.SourceSocket, Peer: ap("192.168.1.10:3000"), Masqueraded: true},
			err:  &clientip.ChainError{Err: clientip.ErrMasqueraded},
			want: "client.address= network.peer.address=192.168.1.10 network.peer.port=3000 sourceip.source=socket sourceip.outcome=masqueraded sourceip.hop=0 sourceip.masqueraded=true"},
		{name: "failure",
			res:  clientip.Result{Peer: ap("10.0.0.1:4000"), Header: "X-Forwarded-For", Hop: 2},
			err:  &clientip.ChainError{Hop: 2, Header: "X-Forwarded-For", Err: clientip.ErrMalformed},
			want: "client.address= network.peer.address=10.0.0.1 network.peer.port=4000 sourceip.source=none sourceip.outcome=malformed sourceip.hop=2 sourceip.header=X-Forwarded-For"},
		{name: "Unix socket peer", res: clientip.Result{}, err: &clientip.ChainError{Err: clientip.ErrNoAddress},
			want: "client.address= sourceip.source=none sourceip.outcome=no_address sourceip.hop=0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, render(SpanAttributes(tc.res, tc.err)))
		})
	}
}

// namingMeterProvider records the scopes it is asked for.
type namingMeterProvider struct {
	metricnoop.MeterProvider
	mu    sync.Mutex
	names []string
}

func (p *namingMeterProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := metric.NewMeterConfig(opts...)
	p.names = append(p.names, name+" "+c.SchemaURL())
	return p.MeterProvider.Meter(name, opts...)
}

type namingTracerProvider struct {
	tracenoop.TracerProvider
	mu    sync.Mutex
	names []string
}

func (p *namingTracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := trace.NewTracerConfig(opts...)
	p.names = append(p.names, name+" "+c.SchemaURL())
	return p.TracerProvider.Tracer(name, opts...)
}

func TestNewProviders(t *testing.T) {
	want := []string{ScopeName + " https://opentelemetry.io/schemas/1.43.0"}
	t.Run("globals by default", func(t *testing.T) {
		mp, tp := &namingMeterProvider{}, &namingTracerProvider{}
		oldMP, oldTP := otel.GetMeterProvider(), otel.GetTracerProvider()
		otel.SetMeterProvider(mp)
		otel.SetTracerProvider(tp)
		defer func() {
			otel.SetMeterProvider(oldMP)
			otel.SetTracerProvider(oldTP)
		}()
		_, err := New()
		require.NoError(t, err)
		assert.Equal(t, want[0], strings.Join(mp.names, ","), "meter scopes")
		assert.Equal(t, want[0], strings.Join(tp.names, ","), "tracer scopes")
	})
	t.Run("options", func(t *testing.T) {
		mp, tp := &namingMeterProvider{}, &namingTracerProvider{}
		_, err := New(WithMeterProvider(mp), WithTracerProvider(tp))
		require.NoError(t, err)
		assert.Equal(t, want[0], strings.Join(mp.names, ","), "meter scopes")
		assert.Equal(t, want[0], strings.Join(tp.names, ","), "tracer scopes")
	})
}

// TestObserveAllocs pins that observing costs nothing on no-op providers,
// and that the middleware with this observer stays within its budget.
func TestObserveAllocs(t *testing.T) {
	in, err := New(WithMeterProvider(metricnoop.NewMeterProvider()), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)
	ctx := context.Background()
	res := clientip.Result{Client: netip.MustParseAddr("203.0.113.7"), Source: clientip.SourceXForwardedFor, Masqueraded: true}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		in.ObserveResolve(ctx, res, nil)
		in.ObserveDeny(ctx, res, middleware.ErrNotAllowed)
	}), "observing allocates on no-op providers")

	r := clientip.MustNew(clientip.Config{TrustedProxies: clientip.Private(), Header: "X-Forwarded-For"})
	mw, err := middleware.New(middleware.Config{Trust: r, Observer: in})
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.0.0.1:4000"
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	w := httptest.NewRecorder()
	assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { h.ServeHTTP(w, req) }), 3.0, "middleware with the otel observer allocates")
}
