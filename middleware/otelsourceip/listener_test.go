package otelsourceip

import (
	"context"
	"net"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/proxyproto"
)

// collectingMeter keeps the callbacks registered with it and runs them on
// collect, as an SDK's reader does, recording each observation as
// "instrument{attributes} value".
type collectingMeter struct {
	metricnoop.Meter
	mu        sync.Mutex
	callbacks map[int]metric.Callback
	next      int
}

type collectingProvider struct {
	metricnoop.MeterProvider
	m *collectingMeter
}

func (p collectingProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

type namedCounter struct {
	metricnoop.Int64ObservableCounter
	name string
}

type namedGauge struct {
	metricnoop.Float64ObservableGauge
	name string
}

type namedUpDown struct {
	metricnoop.Int64ObservableUpDownCounter
	name string
}

func (m *collectingMeter) Int64ObservableCounter(name string, _ ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	return namedCounter{name: name}, nil
}

func (m *collectingMeter) Float64ObservableGauge(name string, _ ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	return namedGauge{name: name}, nil
}

func (m *collectingMeter) Int64ObservableUpDownCounter(name string, _ ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	return namedUpDown{name: name}, nil
}

type registration struct {
	embedded.Registration
	m  *collectingMeter
	id int
}

func (r registration) Unregister() error {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	delete(r.m.callbacks, r.id)
	return nil
}

func (m *collectingMeter) RegisterCallback(f metric.Callback, _ ...metric.Observable) (metric.Registration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.callbacks == nil {
		m.callbacks = map[int]metric.Callback{}
	}
	m.next++
	m.callbacks[m.next] = f
	return registration{m: m, id: m.next}, nil
}

type recorder struct {
	embedded.Observer
	lines []string
}

func (r *recorder) ObserveFloat64(o metric.Float64Observable, v float64, opts ...metric.ObserveOption) {
	var name string
	if g, ok := o.(namedGauge); ok {
		name = g.name
	}
	r.add(name, strconv.FormatFloat(v, 'g', -1, 64), opts)
}

// add records "name{attributes} value".
func (r *recorder) add(name, value string, opts []metric.ObserveOption) {
	attrs := metric.NewObserveConfig(opts).Attributes()
	r.lines = append(r.lines, name+"{"+render(attrs.ToSlice())+"} "+value)
}

func (r *recorder) ObserveInt64(o metric.Int64Observable, v int64, opts ...metric.ObserveOption) {
	var name string
	switch i := o.(type) {
	case namedCounter:
		name = i.name
	case namedUpDown:
		name = i.name
	}
	r.add(name, strconv.FormatInt(v, 10), opts)
}

func (m *collectingMeter) collect(t *testing.T) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var r recorder
	for _, f := range m.callbacks {
		require.NoError(t, f(context.Background(), &r))
	}
	sort.Strings(r.lines)
	return r.lines
}

// ObserveListener exports what a PROXY listener shed, its accept errors and
// its pending connections by trust, with low-cardinality attributes only.
func TestObserveListener(t *testing.T) {
	meter := &collectingMeter{}
	in, err := New(WithMeterProvider(collectingProvider{m: meter}), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)

	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// Nobody is trusted: loopback clients are untrusted, one pending each.
	l, err := proxyproto.NewListener(inner, proxyproto.Config{MaxPendingUntrusted: 1, MaxPendingPerSource: 1})
	require.NoError(t, err)
	defer l.Close()
	reg, err := in.ObserveListener("mqtt", l)
	require.NoError(t, err)
	go l.Accept()

	d := net.Dialer{Timeout: 5 * time.Second}
	silent, err := d.Dial("tcp", l.Addr().String()) // holds the one slot
	require.NoError(t, err)
	defer silent.Close()
	over, err := d.Dial("tcp", l.Addr().String())
	if err == nil { // else reset while connecting: shed all the same
		defer over.Close()
		over.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = over.Read(make([]byte, 1))
		require.Error(t, err)
		require.False(t, err.(net.Error).Timeout(), "the connection over budget is closed at once")
	}

	assert.Equal(t, []string{
		"sourceip.proxyproto.accept_errors{sourceip.listener=mqtt} 0",
		"sourceip.proxyproto.pending{sourceip.listener=mqtt sourceip.trusted=false} 1",
		"sourceip.proxyproto.pending{sourceip.listener=mqtt sourceip.trusted=true} 0",
		"sourceip.proxyproto.shed{sourceip.listener=mqtt sourceip.reason=source_budget} 1",
		"sourceip.proxyproto.shed{sourceip.listener=mqtt sourceip.reason=untrusted_budget} 0",
		"sourceip.proxyproto.unreported{sourceip.listener=mqtt} 0",
	}, meter.collect(t))

	require.NoError(t, reg.Unregister())
	assert.Empty(t, meter.collect(t))
}

// Review finding: refusals that came while Config.MaxOnReject OnReject
// calls were running are not reported to OnReject, so they never reached
// sourceip.proxyproto.rejections, and the listener's Stats.Unreported that
// counts them was not exported either: a flood behind a slow OnReject
// looked smaller than it was. sourceip.proxyproto.unreported exports it.
func TestObserveListenerUnreported(t *testing.T) {
	const flood, limit = 5, 1
	meter := &collectingMeter{}
	in, err := New(WithMeterProvider(collectingProvider{m: meter}), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)

	stuck := make(chan struct{})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l, err := proxyproto.NewListener(inner, proxyproto.Config{
		Trust:       clientip.MustNew(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32")}),
		MaxOnReject: limit,
		OnReject:    func(proxyproto.Rejection) { <-stuck },
	})
	require.NoError(t, err)
	defer l.Close()
	defer close(stuck) // before l.Close
	reg, err := in.ObserveListener("", l)
	require.NoError(t, err)
	defer reg.Unregister()
	go l.Accept()

	// A trusted peer that sends no PROXY header is refused.
	d := net.Dialer{Timeout: 5 * time.Second}
	for range flood {
		c, err := d.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte("GET / HTTP/1.1\r\n"))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		st := l.Stats()
		return st.TotalRejected() == flood && st.Unreported == flood-limit
	}, 10*time.Second, 10*time.Millisecond, "refused, one reported and the rest counted")

	assert.Contains(t, meter.collect(t), "sourceip.proxyproto.unreported{} "+strconv.Itoa(flood-limit))
}
