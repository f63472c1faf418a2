package otelsourceip

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// recording is a MeterProvider whose counters remember each Add as the
// counter's name and the attributes it was given.
type recording struct {
	metricnoop.MeterProvider
	mu   sync.Mutex
	adds []string
}

func (p *recording) Meter(string, ...metric.MeterOption) metric.Meter { return recordingMeter{p: p} }

type recordingMeter struct {
	metricnoop.Meter
	p *recording
}

func (m recordingMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return recordingCounter{name: name, p: m.p}, nil
}

type recordingCounter struct {
	metricnoop.Int64Counter
	name string
	p    *recording
}

func (c recordingCounter) Add(_ context.Context, _ int64, opts ...metric.AddOption) {
	set := metric.NewAddConfig(opts).Attributes()
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.adds = append(c.p.adds, c.name+" "+render(set.ToSlice()))
}

func (p *recording) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.adds
	p.adds = nil
	return out
}

// TestEveryReasonIsCounted: the counters are labelled with every failure
// kind clientip lists and every Source it names, read from those packages
// rather than from their order, so each is counted under its own name.
func TestEveryReasonIsCounted(t *testing.T) {
	p := &recording{}
	in, err := New(WithMeterProvider(p), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)
	ctx := context.Background()
	n := 0
	for r := clientip.ReasonNone + 1; r.Err() != nil; r++ {
		in.ObserveResolve(ctx, clientip.Result{}, &clientip.ChainError{Err: r.Err()})
		assert.Equal(t, []string{ResolutionsName + " sourceip.outcome=" + r.String() + " sourceip.source=none"}, p.take(), "%v", r)
		n++
	}
	assert.Equal(t, int(clientip.ReasonMultipleValues), n)
	for s := range clientip.Source(numSources) {
		in.ObserveDeny(ctx, clientip.Result{Source: s}, middleware.ErrNotAllowed)
		assert.Equal(t, []string{PolicyDenialsName + " sourceip.reason=not_allowed sourceip.source=" + s.String()}, p.take())
	}
	assert.Equal(t, int(clientip.SourceHeader)+1, numSources, "every Source has its options")

	// Values no package returns are counted as none and error, not a panic.
	in.ObserveResolve(ctx, clientip.Result{Source: 99}, errors.New("boom"))
	assert.Equal(t, []string{ResolutionsName + " sourceip.outcome=error sourceip.source=none"}, p.take())
	assert.Equal(t, int(middleware.OutcomeError), outcomeIndex(middleware.Outcome(250)))
}
