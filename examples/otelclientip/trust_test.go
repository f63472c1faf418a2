package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
)

// collectTrust collects the trust instruments (sourceip.trust.*,
// sourceip.ranges.*) as "name{attr=value,…} value" lines, sorted, with the
// kind of each instrument checked: counters are monotonic cumulative sums,
// the others gauges.
func collectTrust(t *testing.T, h *harness) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	var out []string
	line := func(name string, attrs []string, v any) {
		slices.Sort(attrs)
		out = append(out, fmt.Sprintf("%s{%s} %v", name, strings.Join(attrs, ","), v))
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if !strings.HasPrefix(m.Name, "sourceip.trust.") && !strings.HasPrefix(m.Name, "sourceip.ranges.") {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				assert.True(t, d.IsMonotonic, "%s is not monotonic", m.Name)
				assert.Equal(t, metricdata.CumulativeTemporality, d.Temporality, m.Name)
				for _, dp := range d.DataPoints {
					line(m.Name, render(dp.Attributes.ToSlice()), dp.Value)
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					line(m.Name, render(dp.Attributes.ToSlice()), dp.Value)
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					line(m.Name, render(dp.Attributes.ToSlice()), dp.Value)
				}
			default:
				assert.Failf(t, "unexpected data", "%s: %T", m.Name, m.Data)
			}
		}
	}
	slices.Sort(out)
	return out
}

// render renders attributes as key=value.
func render(kvs []attribute.KeyValue) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = string(kv.Key) + "=" + kv.Value.Emit()
	}
	return out
}

// TestObserveTrust exports a trust store's changes and a range refresher's
// state through the SDK: a refresher against a local HTTPS server, with an
// injected clock, feeds a store; a refresh installs a set, another fails,
// a swap is refused; every figure is what Status and Stats say.
func TestObserveTrust(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	list := "198.51.100.0/24\n203.0.113.0/24\n"
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Write([]byte(list))
	}))
	t.Cleanup(provider.Close)

	store, err := clientip.NewStore(clientip.Config{TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/24"), Header: "X-Forwarded-For"}, clientip.StoreOptions{})
	require.NoError(t, err)
	src, err := ranges.NewSource(ranges.SourceConfig{Provider: ranges.ProviderCIDRList, Locations: []string{provider.URL + "/cdn.txt"}})
	require.NoError(t, err)
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := start
	refresher, err := ranges.NewRefresher(ranges.RefresherConfig{
		Source:   src,
		Client:   provider.Client(),
		Clock:    func() time.Time { return now },
		OnUpdate: store.SetRangesFunc("cdn"),
	})
	require.NoError(t, err)

	reg, err := h.inst.ObserveStore("http", store)
	require.NoError(t, err)
	defer reg.Unregister()
	reg2, err := h.inst.ObserveRefresher("cdn", refresher)
	require.NoError(t, err)
	defer reg2.Unregister()

	// Nothing fetched yet: no set, no last success.
	assert.Equal(t, []string{
		"sourceip.ranges.age{sourceip.ranges=cdn} 0",
		"sourceip.ranges.consecutive_failures{sourceip.ranges=cdn} 0",
		"sourceip.ranges.drift.growth{sourceip.ranges=cdn} 0",
		"sourceip.ranges.drift.shrink{sourceip.ranges=cdn} 0",
		"sourceip.ranges.pending{sourceip.ranges=cdn} 0",
		"sourceip.ranges.prefixes{sourceip.ranges=cdn} 0",
		"sourceip.ranges.refreshes{sourceip.ranges=cdn,sourceip.result=failed} 0",
		"sourceip.ranges.refreshes{sourceip.ranges=cdn,sourceip.result=rejected} 0",
		"sourceip.ranges.refreshes{sourceip.ranges=cdn,sourceip.result=unchanged} 0",
		"sourceip.ranges.refreshes{sourceip.ranges=cdn,sourceip.result=updated} 0",
		"sourceip.trust.swaps{sourceip.result=changed,sourceip.store=http} 0",
		"sourceip.trust.swaps{sourceip.result=refused,sourceip.store=http} 0",
		"sourceip.trust.swaps{sourceip.result=unchanged,sourceip.store=http} 0",
	}, collectTrust(t, h))

	require.NoError(t, refresher.Refresh(context.Background()))
	mu.Lock()
	list = "<html>down for maintenance</html>"
	mu.Unlock()
	now = start.Add(90 * time.Minute)
	require.Error(t, refresher.Refresh(context.Background()))
	_, err = store.Swap(clientip.Config{Header: "X-Forwarded-For"}) // the ingress leaves; the cdn's set stays
	require.NoError(t, err)
	_, err = store.Swap(clientip.Config{Header: "X-Forwarded-For", MaxHops: 100})
	require.Error(t, err)

	assert.Equal(t, []string{
		"sourceip.ranges.age{sourceip.ranges=cdn} 5400",
		"sourceip.ranges.consecutive_failures{sourceip.ranges=cdn} 1",
		"sourceip.ranges.drift.growth{sourceip.ranges=cdn} 0",
		"sourceip.ranges.drift.shrink{sourceip.ranges=cdn} 0",
		fmt.Sprintf("sourceip.ranges.last_success{sourceip.ranges=cdn} %v", float64(start.Unix())),
		"sourceip.ranges.pending{sourceip.ranges=cdn} 0",
		"sourceip.ranges.prefixes{sourceip.ranges=cdn} 2",
		"sourceip.ranges.refreshes{sourceip.ranges=cdn,sourceip.result=failed} 1",
		"sourceip.ranges.refreshes{sourceip.ranges=cdn,sourceip.result=rejected} 0",
		"sourceip.ranges.refreshes{sourceip.ranges=cdn,sourceip.result=unchanged} 0",
		"sourceip.ranges.refreshes{sourceip.ranges=cdn,sourceip.result=updated} 1",
		"sourceip.trust.swaps{sourceip.result=changed,sourceip.store=http} 2",
		"sourceip.trust.swaps{sourceip.result=refused,sourceip.store=http} 1",
		"sourceip.trust.swaps{sourceip.result=unchanged,sourceip.store=http} 0",
	}, collectTrust(t, h))
}
