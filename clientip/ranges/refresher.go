package ranges

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourceip/sourceip/clientip"
)

// RefresherConfig configures a [Refresher]. Only Source is required; every
// other zero value is a safe default.
type RefresherConfig struct {
	// Source is the list to keep current. Required.
	Source *Source

	// Interval is the time between refreshes after a success. The zero
	// value means one hour; less than a minute is refused. Requests are
	// conditional (ETag, Last-Modified), so an unchanged list costs a 304.
	Interval time.Duration

	// RetryInterval is the time until the next refresh after a failure or a
	// refusal (after a shrink or growth refusal, which waits for a person, it
	// is Interval). The zero value means five minutes or Interval if that is
	// shorter; it must be between ten seconds and Interval.
	RetryInterval time.Duration

	// Jitter spreads refreshes of many replicas: each wait is drawn from
	// the interval ± Jitter × interval. The zero value means 0.1; at most
	// 0.5.
	Jitter float64

	// Timeout bounds one refresh, every document included (connection,
	// headers and body, so a slow body fails instead of hanging). The zero
	// value means 30 seconds.
	Timeout time.Duration

	// MaxBytes bounds one document. The zero value means the source's limit
	// ([Source.MaxBytes]); a larger value is refused.
	MaxBytes int

	// MaxShrink is the largest fraction of the current set's address space
	// (per family, see [Change]) a refresh may drop. A larger drop is
	// refused with [ErrShrink] and the set waits for
	// [Refresher.AcceptPending]. The zero value means 0.25; it must be at
	// most 1. The first fetch is measured against the starting set too, so a
	// snapshot much older than the provider's current list can hold that
	// fetch until it is accepted; a disk copy (CacheFile) avoids that after
	// the first run.
	MaxShrink float64

	// MaxGrowth is the largest new address space, as a fraction of the
	// current set's (per family), a refresh may add. A larger growth is
	// refused with [ErrGrowth] and waits for [Refresher.AcceptPending]. The
	// zero value means 0.25; math.Inf(1) turns the guard off.
	MaxGrowth float64

	// MaxTotalGrowth bounds where a run of refreshes, each within
	// MaxGrowth, may take the set: the largest new address space, as a
	// fraction of the baseline's (per family, see [Change]), the set may
	// hold. Without it a feed that adds a little less than MaxGrowth at
	// every refresh — a slow poisoning — grows without end (1.25 to the
	// power of the refreshes). A refresh that goes further is refused with
	// [ErrDrift] and waits for [Refresher.AcceptPending]. The baseline is
	// the set a person last accepted with AcceptPending; until then the
	// source's snapshot, else the set the refresher first installed. The
	// disk copy (CacheFile) records it, so a restart does not reset it.
	// The zero value means 1 (the set may grow to twice its baseline's
	// space), or MaxGrowth if that is larger, so that turning the growth
	// guard off turns this one off too; math.Inf(1) turns it off. Like
	// MaxGrowth, it bounds how much address space a feed can add unseen,
	// not which: one added prefix, an attacker's /24, passes both.
	MaxTotalGrowth float64

	// AllowPrivate accepts sets that overlap loopback, private, link-local
	// or CGNAT space, for a list of your own internal proxies. The zero
	// value refuses them ([ErrPrivate]). 0.0.0.0/0, ::/0, overly broad
	// prefixes and reserved space are refused regardless ([CheckSet]).
	AllowPrivate bool

	// CacheFile is the path of the last-good copy on disk. When set, every
	// accepted set is written there atomically, and a new refresher starts
	// from it — if it belongs to the same source, passes [CheckSet] and is
	// newer than the source's snapshot — so a restart while the provider is
	// unreachable keeps the last good set. The zero value keeps no copy.
	CacheFile string

	// OnUpdate, if set, receives every set the refresher is about to
	// install: the starting set when Run begins, then each accepted change.
	// If it returns an error the refresher keeps its current set and
	// reports the refusal ([ErrUpdateRefused]). Calls are sequential, never
	// concurrent; OnUpdate must not call Refresh or AcceptPending. Use it to
	// feed a trust store: store.SetRangesFunc(name) of a [clientip.Store].
	OnUpdate func(clientip.PrefixSet) error

	// Client fetches URLs. The zero value is a client with the default
	// transport. Either way a redirect from https to plain http is refused
	// ([ErrRedirect]) unless the client has its own CheckRedirect.
	Client *http.Client

	// Clock returns the current time. The zero value is time.Now; tests
	// inject a fixed clock.
	Clock func() time.Time

	// Rand returns a number in [0, 1) for jitter. The zero value is
	// math/rand/v2's Float64.
	Rand func() float64

	// Logger, if set, receives a record for every installed set (with the
	// change), refusal and failure. The zero value logs nothing.
	Logger *slog.Logger
}

// Refresher keeps a [Source]'s set current, and never makes it worse: a
// failed, empty, unparseable or refused fetch leaves the current set in
// place. Create one with [NewRefresher], start [Refresher.Run] in a
// goroutine, and read [Refresher.Current] wherever the set is needed (or let
// OnUpdate push it into a trust store).
//
// # Staleness
//
// A refresher never drops its set because it is old: when the provider
// cannot be reached it keeps serving the last good set — from the network,
// else the disk copy, else the embedded snapshot — indefinitely, and says so
// in [Refresher.Status] (Provenance, Confirmed, Age, LastError). Nothing
// fails closed by surprise. Staleness becomes a failure only where you ask
// for one: [Refresher.Check] and [Refresher.HealthHandler] with a maximum
// age. Wire that to alerting rather than to readiness unless you mean every
// replica to leave the load balancer together when the provider's endpoint
// is down.
//
// A Refresher is safe for concurrent use.
type Refresher struct {
	src          *Source
	client       *http.Client
	interval     time.Duration
	retry        time.Duration
	jitter       float64
	timeout      time.Duration
	maxBytes     int
	maxShrink    float64
	maxGrowth    float64
	maxTotal     float64
	allowPrivate bool
	cacheFile    string
	onUpdate     func(clientip.PrefixSet) error
	now          func() time.Time
	rand         func() float64
	log          *slog.Logger

	cur     atomic.Pointer[current]
	running atomic.Bool

	// refreshMu serialises refreshes, AcceptPending and the first delivery
	// to OnUpdate, and guards the fields below it.
	refreshMu sync.Mutex
	docs      []docState // per document: validators and last accepted set
	have      bool       // docs describe the current set
	delivered bool       // OnUpdate accepted the current set (the trust store has it)
	pending   *pendingSet
	baseline  clientip.PrefixSet // what MaxTotalGrowth measures from; empty until there is a set

	mu sync.Mutex // guards st
	st Status
}

type current struct {
	set       clientip.PrefixSet
	prov      Provenance
	confirmed time.Time
}

type pendingSet struct {
	set       clientip.PrefixSet
	docs      []docState
	change    Change
	confirmed time.Time
}

// NewRefresher validates cfg and returns a refresher that serves its
// starting set: the disk copy if one is usable, else the source's snapshot,
// else nothing (an empty set, which trusts no one). It reads the disk copy
// but does not touch the network; [Refresher.Run] or [Refresher.Refresh]
// does. Errors wrap [ErrInvalidConfig]; a disk copy that cannot be used is not
// an error here but is reported in Status.CacheError.
func NewRefresher(cfg RefresherConfig) (*Refresher, error) {
	bad := func(format string, a ...any) (*Refresher, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	if cfg.Source == nil {
		return bad("a Source is required")
	}
	r := &Refresher{
		src:          cfg.Source,
		interval:     cmp0(cfg.Interval, time.Hour),
		jitter:       cmp0(cfg.Jitter, 0.1),
		timeout:      cmp0(cfg.Timeout, 30*time.Second),
		maxBytes:     cmp0(cfg.MaxBytes, cfg.Source.MaxBytes()),
		maxShrink:    cmp0(cfg.MaxShrink, 0.25),
		maxGrowth:    cmp0(cfg.MaxGrowth, 0.25),
		maxTotal:     cmp0(cfg.MaxTotalGrowth, max(1, cmp0(cfg.MaxGrowth, 0.25))),
		allowPrivate: cfg.AllowPrivate,
		cacheFile:    cfg.CacheFile,
		onUpdate:     cfg.OnUpdate,
		now:          cfg.Clock,
		rand:         cfg.Rand,
		log:          cfg.Logger,
		docs:         make([]docState, len(cfg.Source.locations)),
	}
	r.retry = cmp0(cfg.RetryInterval, min(r.interval, 5*time.Minute))
	switch {
	case r.interval < time.Minute:
		return bad("Interval %s is shorter than a minute", r.interval)
	case r.retry < 10*time.Second || r.retry > r.interval:
		return bad("RetryInterval %s is not between 10s and Interval (%s)", r.retry, r.interval)
	case !(r.jitter > 0 && r.jitter <= 0.5):
		return bad("Jitter %v is not in (0, 0.5]", r.jitter)
	case r.timeout < 0:
		return bad("Timeout %s is negative", r.timeout)
	case r.maxBytes < 0 || r.maxBytes > cfg.Source.MaxBytes():
		return bad("MaxBytes %d is not between 1 and the source's limit %d", r.maxBytes, cfg.Source.MaxBytes())
	case !(r.maxShrink > 0 && r.maxShrink <= 1):
		return bad("MaxShrink %v is not in (0, 1]", r.maxShrink)
	case !(r.maxGrowth > 0) || math.IsNaN(r.maxGrowth):
		return bad("MaxGrowth %v is not positive", r.maxGrowth)
	case !(r.maxTotal > 0):
		return bad("MaxTotalGrowth %v is not positive", r.maxTotal)
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.rand == nil {
		r.rand = rand.Float64
	}
	if cfg.Client == nil {
		r.client = &http.Client{CheckRedirect: checkRedirect}
	} else {
		c := *cfg.Client
		if c.CheckRedirect == nil {
			c.CheckRedirect = checkRedirect
		}
		r.client = &c
	}
	r.st.Source = r.src.String()
	cur := r.start()
	r.cur.Store(cur)
	r.st.Drift = Diff(r.baseline, cur.set)
	return r, nil
}

// cmp0 returns v, or def if v is zero.
func cmp0[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// start picks the starting set: the disk copy when it is usable and at
// least as new as the snapshot, else the snapshot, else nothing; and the
// baseline: the disk copy's, else the snapshot.
func (r *Refresher) start() *current {
	snap, haveSnap := r.src.Snapshot()
	if haveSnap && CheckSet(snap.Set, r.allowPrivate) != nil {
		haveSnap = false
	}
	if r.cacheFile != "" {
		d, err := readCache(r.cacheFile, r.src, r.allowPrivate)
		// A copy cannot have been confirmed after now (a clock that ran
		// ahead when it was written, or an edited file); taken as it
		// stands, its age would read zero, and Check would call it fresh,
		// until that date.
		confirmed := earlier(d.confirmed, r.now())
		switch {
		case err == nil && (!haveSnap || !confirmed.Before(snap.Date)):
			r.docs, r.have, r.baseline = d.docs, true, d.baseline
			return &current{set: d.set, prov: ProvenanceDisk, confirmed: confirmed}
		case err == nil:
			r.st.CacheError = fmt.Errorf("%w: %s was confirmed %s, before the embedded snapshot (%s)",
				ErrCache, r.cacheFile, confirmed.Format(time.RFC3339), snap.Date.Format(time.RFC3339))
		case !errors.Is(err, fs.ErrNotExist):
			r.st.CacheError = err
		}
	}
	if haveSnap {
		r.baseline = snap.Set
		return &current{set: snap.Set, prov: ProvenanceSnapshot, confirmed: snap.Date}
	}
	return &current{}
}

// Current returns the set the refresher serves now. It never blocks and
// does not allocate, so it may be called per request or per connection.
func (r *Refresher) Current() clientip.PrefixSet { return r.cur.Load().set }

// Source returns the refresher's source.
func (r *Refresher) Source() *Source { return r.src }

// Run hands the starting set to OnUpdate, then refreshes at once and after
// every Interval (RetryInterval after a failure), with jitter, until ctx is
// done, and returns ctx's error. Failures do not stop it; they are reported
// in [Refresher.Status]. Call it once, usually in its own goroutine; a second
// concurrent call returns an [ErrInvalidConfig] error at once.
func (r *Refresher) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: Run is already running", ErrInvalidConfig)
	}
	defer r.running.Store(false)
	r.refreshMu.Lock()
	if cur := r.cur.Load(); cur.set.Len() > 0 {
		r.delivered = r.deliver(r.now(), cur.set)
	}
	r.refreshMu.Unlock()
	for ctx.Err() == nil {
		_ = r.Refresh(ctx)
		if ctx.Err() != nil {
			break
		}
		r.mu.Lock()
		next := r.st.NextRefresh
		r.mu.Unlock()
		t := time.NewTimer(next.Sub(r.now()))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return ctx.Err()
}

// deliver hands set to OnUpdate and records a refusal. It reports whether
// OnUpdate accepted it (or there is no OnUpdate). Called with refreshMu held.
func (r *Refresher) deliver(now time.Time, set clientip.PrefixSet) bool {
	if r.onUpdate == nil {
		return true
	}
	if err := r.onUpdate(set); err != nil {
		r.record(now, fmt.Errorf("%w: %w", ErrUpdateRefused, err), &r.st.Rejections)
		return false
	}
	return true
}

// Refresh fetches the source's documents now, and installs the result if it
// passes every guard: each document must fetch (or answer 304 Not Modified to
// a conditional request) and parse; the union must pass [CheckSet]; compared
// with the current set it must not shrink or grow by more than MaxShrink or
// MaxGrowth, nor grow past its baseline by more than MaxTotalGrowth (a set
// that does is kept as pending for [Refresher.AcceptPending]); and OnUpdate
// must accept it. Otherwise the current set stays and the error says why.
// It uses the refresher's Clock for every timestamp; refreshes are
// serialised.
func (r *Refresher) Refresh(ctx context.Context) error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	now := r.now()
	r.mu.Lock()
	r.st.Attempts++
	r.st.LastAttempt = now
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	docs := make([]docState, len(r.src.locations))
	changed := false
	confirmed := now
	for i, loc := range r.src.locations {
		f, err := r.fetch(ctx, now, loc, r.docs[i], r.have)
		if err != nil {
			return r.record(now, fmt.Errorf("%s: %w", loc, err), &r.st.Failures)
		}
		confirmed = earlier(confirmed, f.confirmed)
		if f.notModified {
			docs[i] = r.docs[i]
			continue
		}
		set, err := r.src.Parse(f.body)
		if err != nil {
			return r.record(now, fmt.Errorf("%s: %w", loc, err), &r.st.Failures)
		}
		docs[i] = docState{etag: f.etag, lastModified: f.lastModified, set: set}
		changed = true
	}
	cur := r.cur.Load()
	var next clientip.PrefixSet
	for _, d := range docs {
		next = next.Union(d.set)
	}
	if changed {
		if err := CheckSet(next, r.allowPrivate); err != nil {
			return r.record(now, err, &r.st.Rejections)
		}
	}
	if !changed || slices.Equal(next.Prefixes(), cur.set.Prefixes()) {
		if cur.set.Len() > 0 && (r.delivered || r.deliver(now, cur.set)) {
			return r.confirm(now, confirmed, cur.set, docs, &r.st.Unchanged)
		}
		if cur.set.Len() > 0 {
			return r.lastError()
		}
	}
	ch, drift := Diff(cur.set, next), Diff(r.baseline, next)
	var refusal error
	switch {
	case ch.Growth > r.maxGrowth:
		refusal = fmt.Errorf("%w: %s, MaxGrowth %s; AcceptPending installs it", ErrGrowth, ch, percent(r.maxGrowth))
	case ch.Shrink > r.maxShrink:
		refusal = fmt.Errorf("%w: %s, MaxShrink %s; AcceptPending installs it", ErrShrink, ch, percent(r.maxShrink))
	case drift.Growth > r.maxTotal:
		refusal = fmt.Errorf("%w: %s since the baseline of %d prefixes, MaxTotalGrowth %s; AcceptPending installs it and makes it the baseline",
			ErrDrift, drift, r.baseline.Len(), percent(r.maxTotal))
	}
	if refusal != nil {
		r.pending = &pendingSet{set: next, docs: docs, change: ch, confirmed: confirmed}
		r.mu.Lock()
		r.st.Pending, r.st.PendingChange = next.Len(), ch
		r.mu.Unlock()
		// The set waits for a person, so the next look is a regular one.
		return r.recordAfter(now, refusal, &r.st.Rejections, r.interval)
	}
	if !r.deliver(now, next) {
		return r.lastError()
	}
	return r.confirm(now, confirmed, next, docs, &r.st.Updates)
}

// AcceptPending installs the set the shrink, growth or total growth guard
// last refused, after OnUpdate accepts it, and makes it the baseline that
// MaxTotalGrowth measures from. It returns [ErrNoPending] if there is none (a
// later refresh that succeeded, or another acceptance, clears it).
func (r *Refresher) AcceptPending() error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	p := r.pending
	if p == nil {
		return ErrNoPending
	}
	now := r.now()
	if !r.deliver(now, p.set) {
		return r.lastError()
	}
	r.baseline = p.set
	return r.confirm(now, p.confirmed, p.set, p.docs, &r.st.Updates)
}

// confirm installs set as the current set, confirmed by the provider at
// confirmed, and writes the disk copy. counter is Updates or Unchanged.
// Called with refreshMu held, after OnUpdate accepted set.
func (r *Refresher) confirm(now, confirmed time.Time, set clientip.PrefixSet, docs []docState, counter *uint64) error {
	prev := r.cur.Load()
	r.cur.Store(&current{set: set, prov: ProvenanceNetwork, confirmed: confirmed})
	r.docs, r.have, r.delivered, r.pending = docs, true, true, nil
	if r.baseline.Len() == 0 {
		r.baseline = set
	}
	var cacheErr error
	if r.cacheFile != "" {
		cacheErr = writeCache(r.cacheFile, r.src, docs, r.baseline, confirmed)
	}
	drift := Diff(r.baseline, set)
	r.mu.Lock()
	r.st.Drift = drift
	*counter++
	r.st.LastSuccess = now
	r.st.LastError = nil
	r.st.ConsecutiveFailures = 0
	r.st.NextRefresh = now.Add(r.jittered(r.interval))
	r.st.Pending, r.st.PendingChange = 0, Change{}
	if r.cacheFile != "" {
		r.st.CacheError = cacheErr
	}
	r.mu.Unlock()
	if r.log != nil && counter == &r.st.Updates {
		r.log.Info("ranges: installed a new set", "source", r.src.String(), "prefixes", set.Len(),
			"change", Diff(prev.set, set).String(), "previous", prev.prov.String())
	}
	if cacheErr != nil && r.log != nil {
		r.log.Warn("ranges: cannot write the disk copy", "source", r.src.String(), "err", cacheErr)
	}
	return nil
}

// record reports a failed or refused refresh and schedules a retry.
func (r *Refresher) record(now time.Time, err error, counter *uint64) error {
	return r.recordAfter(now, err, counter, r.retry)
}

// recordAfter is record with the time until the next refresh.
func (r *Refresher) recordAfter(now time.Time, err error, counter *uint64, wait time.Duration) error {
	r.mu.Lock()
	*counter++
	r.st.LastError = err
	r.st.LastErrorTime = now
	r.st.ConsecutiveFailures++
	r.st.NextRefresh = now.Add(r.jittered(wait))
	r.mu.Unlock()
	if r.log != nil {
		r.log.Warn("ranges: refresh failed; keeping the current set", "source", r.src.String(), "err", err)
	}
	return err
}

func (r *Refresher) lastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.LastError
}

// jittered returns d ± Jitter × d.
func (r *Refresher) jittered(d time.Duration) time.Duration {
	return d + time.Duration((2*r.rand()-1)*r.jitter*float64(d))
}

// Status returns the refresher's state as of its Clock's now.
func (r *Refresher) Status() Status {
	now := r.now()
	cur := r.cur.Load()
	r.mu.Lock()
	st := r.st
	r.mu.Unlock()
	st.Provenance, st.Prefixes, st.Confirmed = cur.prov, cur.set.Len(), cur.confirmed
	if !cur.confirmed.IsZero() {
		st.Age = max(0, now.Sub(cur.confirmed))
	}
	return st
}

// Check reports whether the refresher's data is fit to serve: it is
// [ErrNoData] when there is no set at all, and [ErrStale] when maxAge > 0 and
// the set was last confirmed longer ago than maxAge. Neither changes what
// the refresher serves. A pending set or a failing refresh alone is not an
// error here while the data is young enough; see [Status] for those.
func (r *Refresher) Check(maxAge time.Duration) error {
	st := r.Status()
	if st.Provenance == ProvenanceNone {
		return fmt.Errorf("%w: %s (last error: %v)", ErrNoData, st.Source, st.LastError)
	}
	if maxAge > 0 && st.Age > maxAge {
		return fmt.Errorf("%w: %s: the %s set was confirmed %s ago, the limit is %s (last error: %v)",
			ErrStale, st.Source, st.Provenance, st.Age.Round(time.Second), maxAge, st.LastError)
	}
	return nil
}

// HealthHandler returns an [http.Handler] for a health or readiness probe:
// it answers 200 with a one-line summary when [Refresher.Check](maxAge)
// passes and 503 with the error when it does not.
func (r *Refresher) HealthHandler(maxAge time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := r.Check(maxAge); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		st := r.Status()
		fmt.Fprintf(w, "ok: %d prefixes from %s, confirmed %s ago\n", st.Prefixes, st.Provenance, st.Age.Round(time.Second))
	})
}
