package otelsourceip

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sourceip/sourceip/clientip/ranges"
)

// Review finding: ranges.Status gained Drift, how far the current set is
// from the baseline RefresherConfig.MaxTotalGrowth measures from, but
// ObserveRefresher did not export it, so a feed growing refresh by refresh
// toward ErrDrift showed nothing until the guard held a set.
// sourceip.ranges.drift.growth and .drift.shrink export it.
func TestObserveRefresherDrift(t *testing.T) {
	meter := &collectingMeter{}
	in, err := New(WithMeterProvider(collectingProvider{m: meter}), WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err)

	var mu sync.Mutex
	list := "198.51.100.0/24\n203.0.113.0/24\n" // the baseline: 512 addresses
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Write([]byte(list))
	}))
	t.Cleanup(provider.Close)
	src, err := ranges.NewSource(ranges.SourceConfig{Provider: ranges.ProviderCIDRList, Locations: []string{provider.URL + "/cdn.txt"}})
	require.NoError(t, err)
	r, err := ranges.NewRefresher(ranges.RefresherConfig{Source: src, Client: provider.Client()})
	require.NoError(t, err)
	reg, err := in.ObserveRefresher("cdn", r)
	require.NoError(t, err)
	defer reg.Unregister()

	drift := func() []string {
		var out []string
		for _, l := range meter.collect(t) {
			if strings.HasPrefix(l, "sourceip.ranges.drift.") {
				out = append(out, l)
			}
		}
		return out
	}
	require.NoError(t, r.Refresh(context.Background()))
	assert.Equal(t, []string{
		"sourceip.ranges.drift.growth{sourceip.ranges=cdn} 0",
		"sourceip.ranges.drift.shrink{sourceip.ranges=cdn} 0",
	}, drift(), "the first set is the baseline")

	mu.Lock()
	// 64 addresses more and 32 fewer than the baseline's 512.
	list = "192.0.2.0/26\n198.51.100.0/24\n203.0.113.0/25\n203.0.113.128/26\n203.0.113.192/27\n"
	mu.Unlock()
	require.NoError(t, r.Refresh(context.Background()))
	st := r.Status()
	require.Equal(t, ranges.Change{Growth: 0.125, Shrink: 0.0625, GrowthFamily: "IPv4", ShrinkFamily: "IPv4"}, st.Drift)
	assert.Equal(t, []string{
		"sourceip.ranges.drift.growth{sourceip.ranges=cdn} 0.125",
		"sourceip.ranges.drift.shrink{sourceip.ranges=cdn} 0.0625",
	}, drift())
}
