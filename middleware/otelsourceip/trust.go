package otelsourceip

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
)

// Names of the instruments that report the trust configuration: a range
// refresher's state ([Instrumentation.ObserveRefresher]) and a trust store's
// changes ([Instrumentation.ObserveStore]).
const (
	RangesPrefixesName            = "sourceip.ranges.prefixes"
	RangesAgeName                 = "sourceip.ranges.age"
	RangesLastSuccessName         = "sourceip.ranges.last_success"
	RangesPendingName             = "sourceip.ranges.pending"
	RangesConsecutiveFailuresName = "sourceip.ranges.consecutive_failures"
	RangesRefreshesName           = "sourceip.ranges.refreshes"
	RangesDriftGrowthName         = "sourceip.ranges.drift.growth"
	RangesDriftShrinkName         = "sourceip.ranges.drift.shrink"
	TrustSwapsName                = "sourceip.trust.swaps"
)

// Attribute keys of the trust instruments. Metrics.
const (
	// RangesKey is the name given to [Instrumentation.ObserveRefresher].
	RangesKey = attribute.Key("sourceip.ranges")

	// StoreKey is the name given to [Instrumentation.ObserveStore].
	StoreKey = attribute.Key("sourceip.store")

	// ResultKey is how a refresh ended ("updated", "unchanged", "failed",
	// "rejected") or what a trust change did ("changed", "unchanged",
	// "refused").
	ResultKey = attribute.Key("sourceip.result")
)

// trustInstruments are read from ranges.Refresher.Status and
// clientip.Store.Stats when the meter collects.
type trustInstruments struct {
	rangesPrefixes    metric.Int64ObservableGauge
	rangesAge         metric.Float64ObservableGauge
	rangesLastSuccess metric.Float64ObservableGauge
	rangesPending     metric.Int64ObservableGauge
	rangesFailing     metric.Int64ObservableGauge
	rangesRefreshes   metric.Int64ObservableCounter
	rangesDriftGrowth metric.Float64ObservableGauge
	rangesDriftShrink metric.Float64ObservableGauge
	trustSwaps        metric.Int64ObservableCounter
}

func (t *trustInstruments) create(m metric.Meter) error {
	var err, e error
	t.rangesPrefixes, e = m.Int64ObservableGauge(RangesPrefixesName,
		metric.WithDescription("Prefixes in the set a range refresher serves."),
		metric.WithUnit("{prefix}"))
	err = errors.Join(err, e)
	t.rangesAge, e = m.Float64ObservableGauge(RangesAgeName,
		metric.WithDescription("Time since a range refresher's set was last known to be the provider's list."),
		metric.WithUnit("s"))
	err = errors.Join(err, e)
	t.rangesLastSuccess, e = m.Float64ObservableGauge(RangesLastSuccessName,
		metric.WithDescription("When a range refresher last fetched or confirmed an acceptable set, in seconds since the Unix epoch; absent before the first success."),
		metric.WithUnit("s"))
	err = errors.Join(err, e)
	t.rangesPending, e = m.Int64ObservableGauge(RangesPendingName,
		metric.WithDescription("Prefixes of a set a range refresher's shrink or growth guard holds back until it is accepted; 0 if none."),
		metric.WithUnit("{prefix}"))
	err = errors.Join(err, e)
	t.rangesFailing, e = m.Int64ObservableGauge(RangesConsecutiveFailuresName,
		metric.WithDescription("Refreshes of a range refresher that failed since its last success."),
		metric.WithUnit("{refresh}"))
	err = errors.Join(err, e)
	t.rangesRefreshes, e = m.Int64ObservableCounter(RangesRefreshesName,
		metric.WithDescription("Refreshes of a range refresher, by result: updated, unchanged, failed (fetch or parse), rejected (by a guard or the trust store)."),
		metric.WithUnit("{refresh}"))
	err = errors.Join(err, e)
	t.rangesDriftGrowth, e = m.Float64ObservableGauge(RangesDriftGrowthName,
		metric.WithDescription("New address space a range refresher's current set holds beyond its baseline, as a fraction of the baseline's (the larger of the two families); the refresher's MaxTotalGrowth bounds it."),
		metric.WithUnit("1"))
	err = errors.Join(err, e)
	t.rangesDriftShrink, e = m.Float64ObservableGauge(RangesDriftShrinkName,
		metric.WithDescription("Fraction of a range refresher's baseline address space its current set no longer holds (the larger of the two families)."),
		metric.WithUnit("1"))
	err = errors.Join(err, e)
	t.trustSwaps, e = m.Int64ObservableCounter(TrustSwapsName,
		metric.WithDescription("Changes asked of a trust store, by result: changed, unchanged, refused (the configuration in force stayed)."),
		metric.WithUnit("{change}"))
	return errors.Join(err, e)
}

// observeOpts returns the options of one observation with the attributes kv
// and, when name is not empty, key=name.
func observeOpts(key attribute.Key, name string, kv ...attribute.KeyValue) []metric.ObserveOption {
	if name != "" {
		kv = append(kv, key.String(name))
	}
	return []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
}

// resultOpts returns observeOpts(key, name, sourceip.result=r) for each
// result r.
func resultOpts(key attribute.Key, name string, results ...string) [][]metric.ObserveOption {
	out := make([][]metric.ObserveOption, len(results))
	for i, r := range results {
		out[i] = observeOpts(key, name, ResultKey.String(r))
	}
	return out
}

// ObserveRefresher reports r's [ranges.Status] each time the meter
// collects: sourceip.ranges.prefixes, .age (seconds), .last_success
// (seconds since the Unix epoch, absent until the first success), .pending,
// .consecutive_failures, .drift.growth and .drift.shrink (Status.Drift: how
// far the set is from the baseline RefresherConfig.MaxTotalGrowth measures
// from, as fractions of its space; growth is +Inf when the set holds a
// family the baseline has none of) as gauges, and sourceip.ranges.refreshes as a
// counter by sourceip.result (updated, unchanged, failed, rejected). name,
// when not empty, is set as sourceip.ranges on all of them, to tell
// refreshers apart; it should be a fixed name such as "cloudflare", never a
// URL. Alert on age and consecutive_failures rather than fail readiness: a
// refresher keeps serving its last good set (see the ranges package). Call
// Unregister on the result when r is no longer used.
func (in *Instrumentation) ObserveRefresher(name string, r *ranges.Refresher) (metric.Registration, error) {
	all := observeOpts(RangesKey, name)
	res := resultOpts(RangesKey, name, "updated", "unchanged", "failed", "rejected")
	t := &in.trust
	return in.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := r.Status()
		o.ObserveInt64(t.rangesPrefixes, int64(st.Prefixes), all...)
		o.ObserveFloat64(t.rangesAge, st.Age.Seconds(), all...)
		if !st.LastSuccess.IsZero() {
			o.ObserveFloat64(t.rangesLastSuccess, float64(st.LastSuccess.UnixNano())/1e9, all...)
		}
		o.ObserveInt64(t.rangesPending, int64(st.Pending), all...)
		o.ObserveInt64(t.rangesFailing, int64(st.ConsecutiveFailures), all...)
		o.ObserveFloat64(t.rangesDriftGrowth, st.Drift.Growth, all...)
		o.ObserveFloat64(t.rangesDriftShrink, st.Drift.Shrink, all...)
		for i, v := range [...]uint64{st.Updates, st.Unchanged, st.Failures, st.Rejections} {
			o.ObserveInt64(t.rangesRefreshes, int64(v), res[i]...)
		}
		return nil
	}, t.rangesPrefixes, t.rangesAge, t.rangesLastSuccess, t.rangesPending, t.rangesFailing, t.rangesRefreshes,
		t.rangesDriftGrowth, t.rangesDriftShrink)
}

// ObserveStore reports s's [clientip.StoreStats] each time the meter
// collects: sourceip.trust.swaps, a counter of the changes asked of the
// store by sourceip.result: "changed" (installed), "unchanged" (the
// configuration was already in force) and "refused" (clientip.New refused
// it, and the configuration in force stayed; the store's Logger says why).
// name, when not empty, is set as sourceip.store, to tell several chains'
// stores apart; it should be a fixed name such as "mqtt". Call Unregister
// on the result when s is no longer used. Collecting does not allocate
// beyond what the meter does.
func (in *Instrumentation) ObserveStore(name string, s *clientip.Store) (metric.Registration, error) {
	res := resultOpts(StoreKey, name, "changed", "unchanged", "refused")
	swaps := in.trust.trustSwaps
	return in.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		for i, v := range [...]uint64{st.Changes, st.Unchanged, st.Refused} {
			o.ObserveInt64(swaps, int64(v), res[i]...)
		}
		return nil
	}, swaps)
}
