package ranges

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/stretchr/testify/assert"
	must "github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// harness is a refresher of Cloudflare's two lists served by a local
// provider, with an injected clock and a recording OnUpdate.
type harness struct {
	srv    *rangeServer
	v4, v6 *servedDoc
	clock  *fakeClock
	r      *Refresher

	mu      sync.Mutex
	updates []clientip.PrefixSet
	refuse  error
}

func newHarness(t *testing.T, mod func(*RefresherConfig)) *harness {
	t.Helper()
	h := &harness{srv: newRangeServer(t, "/ips-v4", "/ips-v6"), clock: newClock(t0)}
	h.v4, h.v6 = h.srv.docs["/ips-v4"], h.srv.docs["/ips-v6"]
	h.v4.serve(snapCloudflareV4, `"cf-v4-1"`, "Tue, 29 Oct 2024 04:30:07 GMT")
	h.v6.serve(snapCloudflareV6, "", "Wed, 11 Oct 2023 18:30:17 GMT")
	src, err := NewSource(SourceConfig{Provider: ProviderCloudflare, Locations: []string{h.srv.URL + "/ips-v4", h.srv.URL + "/ips-v6"}})
	must.NoError(t, err)
	cfg := RefresherConfig{
		Source: src,
		Client: h.srv.Client(),
		Clock:  h.clock.Now,
		Rand:   func() float64 { return 0.5 }, // no jitter offset
		OnUpdate: func(s clientip.PrefixSet) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.refuse != nil {
				return h.refuse
			}
			h.updates = append(h.updates, s)
			return nil
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	h.r, err = NewRefresher(cfg)
	must.NoError(t, err)
	return h
}

func (h *harness) updateCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.updates)
}

func (h *harness) lastUpdate() clientip.PrefixSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.updates[len(h.updates)-1]
}

func (h *harness) setRefuse(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refuse = err
}

// without returns list without the line holding prefix; it fails loudly
// rather than return the list unchanged.
func without(list, prefix string) string {
	lines := strings.Split(list, "\n")
	i := slices.Index(lines, prefix)
	if i < 0 {
		panic("without: " + prefix + " is not a line of the list")
	}
	return strings.Join(slices.Delete(lines, i, i+1), "\n")
}

var cloudflareSnapshotDate = time.Date(2025, 7, 25, 7, 30, 34, 0, time.UTC)

func TestRefresherStartsFromSnapshot(t *testing.T) {
	h := newHarness(t, nil)
	st := h.r.Status()
	assert.Equal(t, ProvenanceSnapshot, st.Provenance)
	assert.Equal(t, 22, st.Prefixes)
	assert.WithinDuration(t, cloudflareSnapshotDate, st.Confirmed, 0, "confirmed")
	assert.Equal(t, t0.Sub(cloudflareSnapshotDate), st.Age)
	n, _, _ := h.v4.seen()
	assert.Zero(t, n, "NewRefresher touched the network")
	assert.True(t, h.r.Current().Contains(netip.MustParseAddr("104.16.0.1")), "Current is not the snapshot")
}

func TestRefresherConditionalRequests(t *testing.T) {
	h := newHarness(t, nil)
	must.NoError(t, h.r.Refresh(context.Background()))
	st := h.r.Status()
	must.Equal(t, ProvenanceNetwork, st.Provenance, "after a fetch equal to the snapshot")
	must.WithinDuration(t, t0, st.Confirmed, 0, "after a fetch equal to the snapshot")
	must.Equal(t, uint64(1), st.Unchanged, "after a fetch equal to the snapshot")
	must.Zero(t, st.Updates, "after a fetch equal to the snapshot")
	must.Equal(t, 1, h.updateCount(), "after a fetch equal to the snapshot")
	h.clock.Advance(time.Hour)
	must.NoError(t, h.r.Refresh(context.Background()))
	_, inm, _ := h.v4.seen()
	_, _, ims := h.v6.seen()
	assert.Equal(t, "", inm[0], "ips-v4 If-None-Match: none first")
	assert.Equal(t, `"cf-v4-1"`, inm[1], "ips-v4 If-None-Match: then the ETag")
	assert.Equal(t, "", ims[0], "ips-v6 If-Modified-Since: none first")
	assert.Equal(t, "Wed, 11 Oct 2023 18:30:17 GMT", ims[1], "ips-v6 If-Modified-Since: then the Last-Modified")
	st = h.r.Status()
	assert.Equal(t, uint64(2), st.Unchanged, "after 304s")
	assert.WithinDuration(t, t0.Add(time.Hour), st.Confirmed, 0, "after 304s")
	assert.Zero(t, st.Age, "after 304s")
	assert.Equal(t, 1, h.updateCount(), "a 304 must not call OnUpdate again")
}

// A server that answers 304 to a request without validators is broken or
// hostile; the refresher has nothing the 304 could refer to.
func TestRefresherRefusesUnconditional304(t *testing.T) {
	h := newHarness(t, nil)
	h.v4.fail(http.StatusNotModified)
	must.ErrorIs(t, h.r.Refresh(context.Background()), ErrHTTPStatus)
}

func TestRefresherInstallsChange(t *testing.T) {
	h := newHarness(t, nil)
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22")+"\n", `"cf-v4-2"`, "")
	must.NoError(t, h.r.Refresh(context.Background()))
	st := h.r.Status()
	must.Equal(t, uint64(1), st.Updates)
	must.Equal(t, 21, st.Prefixes)
	must.Equal(t, 1, h.updateCount(), "OnUpdate calls")
	must.Equal(t, 21, h.lastUpdate().Len(), "prefixes delivered to OnUpdate")
	assert.False(t, h.r.Current().Contains(netip.MustParseAddr("131.0.72.1")), "the dropped prefix is still trusted")
	assert.WithinDuration(t, t0.Add(time.Hour), st.NextRefresh, 0, "schedule after success")
	assert.NoError(t, st.LastError, "schedule after success")
	assert.WithinDuration(t, t0, st.LastSuccess, 0, "schedule after success")
}

func TestRefresherKeepsTheCurrentSet(t *testing.T) {
	const big = 4096
	tests := []struct {
		name      string
		mod       func(*RefresherConfig)
		prepare   func(t *testing.T, h *harness)
		wantErr   error
		rejection bool // counted as a refusal rather than a failure
	}{
		{"HTTP 500", nil, func(t *testing.T, h *harness) { h.v6.fail(http.StatusInternalServerError) }, ErrHTTPStatus, false},
		{"HTTP 404", nil, func(t *testing.T, h *harness) { h.v4.fail(http.StatusNotFound) }, ErrHTTPStatus, false},
		{"Cloudflare's HTML error page served with 200, as a mirror recorded it", nil, func(t *testing.T, h *harness) {
			h.v4.serve(string(readFixture(t, "testdata/cloudflare-ips-v4-500.html")), `"x"`, "")
		}, ErrMalformed, false},
		{"empty body", nil, func(t *testing.T, h *harness) { h.v4.serve("", `"x"`, "") }, ErrEmpty, false},
		{"one bad line spoils the list", nil, func(t *testing.T, h *harness) { h.v4.serve(snapCloudflareV4+"\n104.16.0.1/13", `"x"`, "") }, ErrInvalidPrefix, false},
		{"0.0.0.0/0", nil, func(t *testing.T, h *harness) { h.v4.serve("0.0.0.0/0\n", `"x"`, "") }, ErrAllAddresses, true},
		{"::/0 added to a real list", nil, func(t *testing.T, h *harness) { h.v6.serve(snapCloudflareV6+"\n::/0", `"x"`, "") }, ErrAllAddresses, true},
		{"6to4's 2002::/16 (RFC 3056) added to a real list trusts every IPv4 host", nil, func(t *testing.T, h *harness) { h.v6.serve(snapCloudflareV6+"\n2002::/16", `"x"`, "") }, ErrAllAddresses, true},
		{"0.0.0.0/0 split in halves", nil, func(t *testing.T, h *harness) { h.v4.serve("0.0.0.0/1\n128.0.0.0/1\n", `"x"`, "") }, ErrTooBroad, true},
		{"private space", nil, func(t *testing.T, h *harness) { h.v4.serve(snapCloudflareV4+"\n10.0.0.0/8", `"x"`, "") }, ErrPrivate, true},
		{"oversized body with Content-Length", func(c *RefresherConfig) { c.MaxBytes = big }, func(t *testing.T, h *harness) {
			h.v4.serve(strings.Repeat("# padding\n", big), `"x"`, "")
		}, ErrTooLarge, false},
		{"oversized body without Content-Length", func(c *RefresherConfig) { c.MaxBytes = big }, func(t *testing.T, h *harness) {
			h.v4.serve(strings.Repeat("# padding\n", big), `"x"`, "")
			h.v4.chunked = true
		}, ErrTooLarge, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.mod)
			tc.prepare(t, h)
			err := h.r.Refresh(context.Background())
			must.ErrorIs(t, err, tc.wantErr)
			st := h.r.Status()
			assert.Equal(t, ProvenanceSnapshot, st.Provenance, "the set changed")
			assert.Equal(t, 22, st.Prefixes, "the set changed")
			assert.Zero(t, h.updateCount(), "the set changed")
			assert.ErrorIs(t, st.LastError, tc.wantErr, "status reports the error")
			assert.WithinDuration(t, t0, st.LastErrorTime, 0, "status reports the error")
			assert.Equal(t, 1, st.ConsecutiveFailures, "status reports the error")
			if tc.rejection {
				assert.Equal(t, uint64(1), st.Rejections, "counted as a rejection")
				assert.Zero(t, st.Failures, "counted as a rejection")
			} else {
				assert.Equal(t, uint64(1), st.Failures, "counted as a failure")
				assert.Zero(t, st.Rejections, "counted as a failure")
			}
			assert.WithinDuration(t, t0.Add(5*time.Minute), st.NextRefresh, 0, "retry after RetryInterval")
		})
	}
}

// A provider whose body stalls after the headers must not hang the
// refresher: Timeout covers the body. The half body that arrived is never
// parsed, even when the transport reports it as complete.
func TestRefresherSlowBodyTimesOut(t *testing.T) {
	h := newHarness(t, func(c *RefresherConfig) { c.Timeout = 50 * time.Millisecond })
	stall := make(chan struct{})
	defer close(stall)
	h.v4.mu.Lock()
	h.v4.stall = stall
	h.v4.mu.Unlock()
	must.ErrorIs(t, h.r.Refresh(context.Background()), context.DeadlineExceeded)
	st := h.r.Status()
	assert.Equal(t, ProvenanceSnapshot, st.Provenance)
	assert.Equal(t, uint64(1), st.Failures)
}

// cutTransport answers every request with the first half of body and
// then, once the request's context is done, a clean end of body: what
// net/http's client was seen to return (in about one run in five of
// TestRefresherSlowBodyTimesOut) when a server ends a chunked response after
// the client's deadline.
type cutTransport struct{ body string }

func (c cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{},
		Body:       &cutBody{half: c.body[:strings.LastIndexByte(c.body[:len(c.body)/2], '\n')+1], ctx: req.Context()},
		Request:    req,
	}, nil
}

type cutBody struct {
	half string
	ctx  context.Context
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.half != "" {
		n := copy(p, b.half)
		b.half = b.half[n:]
		return n, nil
	}
	<-b.ctx.Done()
	return 0, io.EOF
}

func (b *cutBody) Close() error { return nil }

// The half that arrived before the deadline ends on a line boundary, so it
// parses as a shorter list; it must still not be used.
func TestRefresherBodyCutByDeadlineIsNotParsed(t *testing.T) {
	src, _ := NewSource(SourceConfig{Provider: ProviderCIDRList, Locations: []string{"https://edge.example/list"}})
	list := strings.Repeat("192.0.2.0/24\n198.51.100.0/24\n203.0.113.0/24\n", 4)
	r, err := NewRefresher(RefresherConfig{
		Source:  src,
		Client:  &http.Client{Transport: cutTransport{list}},
		Clock:   newClock(t0).Now,
		Timeout: time.Millisecond,
	})
	must.NoError(t, err)
	must.ErrorIs(t, r.Refresh(context.Background()), context.DeadlineExceeded)
	assert.Zero(t, r.Current().Len(), "the cut body was installed: %s", r.Current())
}

func TestRefresherShrinkGuard(t *testing.T) {
	h := newHarness(t, nil)
	// A truncated ips-v4: two of fifteen prefixes.
	h.v4.serve("173.245.48.0/20\n103.21.244.0/22\n", `"cf-v4-cut"`, "")
	err := h.r.Refresh(context.Background())
	must.ErrorIs(t, err, ErrShrink)
	st := h.r.Status()
	must.Equal(t, 22, st.Prefixes)
	must.Equal(t, 9, st.Pending)
	must.GreaterOrEqual(t, st.PendingChange.Shrink, 0.9)
	must.Equal(t, "IPv4", st.PendingChange.ShrinkFamily)
	must.Zero(t, h.updateCount(), "OnUpdate calls")
	assert.WithinDuration(t, t0.Add(time.Hour), st.NextRefresh, 0, "a set waiting for a person is looked at again after Interval, not RetryInterval")
	h.clock.Advance(time.Minute)
	must.NoError(t, h.r.AcceptPending())
	st = h.r.Status()
	assert.Equal(t, 9, st.Prefixes, "after AcceptPending")
	assert.Zero(t, st.Pending, "after AcceptPending")
	assert.Equal(t, ProvenanceNetwork, st.Provenance, "after AcceptPending")
	assert.WithinDuration(t, t0, st.Confirmed, 0, "after AcceptPending")
	assert.Equal(t, 1, h.updateCount(), "OnUpdate calls after AcceptPending")
	assert.Equal(t, uint64(1), st.Updates, "after AcceptPending")
	assert.ErrorIs(t, h.r.AcceptPending(), ErrNoPending, "second AcceptPending")
}

func TestRefresherGrowthGuard(t *testing.T) {
	grown := snapCloudflareV4 + "\n44.0.0.0/10" // 4M addresses on top of Cloudflare's 1.5M
	h := newHarness(t, nil)
	h.v4.serve(grown, `"cf-v4-grown"`, "")
	must.ErrorIs(t, h.r.Refresh(context.Background()), ErrGrowth)
	must.False(t, h.r.Current().Contains(netip.MustParseAddr("44.0.0.1")), "the refused prefix is trusted")
	h = newHarness(t, func(c *RefresherConfig) { c.MaxGrowth = math.Inf(1) })
	h.v4.serve(grown, `"cf-v4-grown"`, "")
	must.NoError(t, h.r.Refresh(context.Background()), "with the guard off")
	must.True(t, h.r.Current().Contains(netip.MustParseAddr("44.0.0.1")), "with the guard off")
}

// TestRefresherTotalGrowthGuard: slow poisoning. A feed that adds a little
// less than MaxGrowth at every refresh passes that guard for ever, each step
// measured from the last; after n hourly refreshes it is 1.25^n times its
// size. Here each step adds a /14, 17% of Cloudflare's 1.5M IPv4
// addresses; the sixth takes the set past twice the snapshot's space and is
// held, across a restart too, until a person accepts it.
func TestRefresherTotalGrowthGuard(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cloudflare.json")
	h := newHarness(t, func(c *RefresherConfig) { c.CacheFile = cache })
	ctx := context.Background()
	list := snapCloudflareV4
	serveStep := func(i int) {
		list += fmt.Sprintf("\n44.%d.0.0/14", 4*i)
		h.v4.serve(list, fmt.Sprintf(`"cf-v4-step-%d"`, i), "")
		h.clock.Advance(time.Hour)
	}
	for i := range 5 {
		serveStep(i)
		must.NoError(t, h.r.Refresh(ctx), "step %d, within MaxGrowth of the step before", i)
	}
	st := h.r.Status()
	must.InDelta(t, 5*262144/1524736.0, st.Drift.Growth, 1e-9, "Status.Drift after five steps")
	var line strings.Builder
	slog.New(slog.NewTextHandler(&line, nil)).Info("ranges", "status", st)
	assert.Contains(t, line.String(), `status.drift="shrink 0.0%, growth 86.0% (IPv4)"`, "log line")
	serveStep(5)
	err := h.r.Refresh(ctx)
	must.ErrorIs(t, err, ErrDrift, "the sixth step, 14.7% of the current set")
	st = h.r.Status()
	assert.Equal(t, 22+5, st.Prefixes, "the current set changed")
	assert.Equal(t, 22+6, st.Pending, "pending")
	assert.False(t, h.r.Current().Contains(netip.MustParseAddr("44.20.0.1")), "the sixth step is trusted")

	// A restart does not forget the baseline: the disk copy records it.
	r2, err := NewRefresher(RefresherConfig{Source: h.r.Source(), CacheFile: cache, Client: h.srv.Client(), Clock: h.clock.Now})
	must.NoError(t, err)
	must.Equal(t, ProvenanceDisk, r2.Status().Provenance, "restart")
	must.ErrorIs(t, r2.Refresh(ctx), ErrDrift, "after a restart")

	// A person accepts it: it is the new baseline, and the feed may grow
	// from there.
	must.NoError(t, r2.AcceptPending())
	assert.Zero(t, r2.Status().Drift.Growth, "drift after AcceptPending")
	serveStep(6)
	must.NoError(t, r2.Refresh(ctx), "a step from the accepted baseline")
	assert.True(t, r2.Current().Contains(netip.MustParseAddr("44.24.0.1")), "the step from the accepted baseline")

	// With the guard off, the sixth step goes in like the others.
	h = newHarness(t, func(c *RefresherConfig) { c.MaxTotalGrowth = math.Inf(1) })
	list = snapCloudflareV4
	for i := range 6 {
		serveStep(i)
		must.NoError(t, h.r.Refresh(ctx), "step %d with the guard off", i)
	}
}

// A pending set is dropped when the provider goes back to the current list.
func TestRefresherPendingClearedByGoodRefresh(t *testing.T) {
	h := newHarness(t, nil)
	h.v4.serve("173.245.48.0/20\n", `"cf-v4-cut"`, "")
	must.ErrorIs(t, h.r.Refresh(context.Background()), ErrShrink)
	h.v4.serve(snapCloudflareV4, `"cf-v4-1"`, "")
	must.NoError(t, h.r.Refresh(context.Background()))
	assert.ErrorIs(t, h.r.AcceptPending(), ErrNoPending)
	assert.Zero(t, h.r.Status().Pending, "pending")
}

// OnUpdate is the trust store's veto: a set it refuses is not installed.
func TestRefresherOnUpdateRefusal(t *testing.T) {
	h := newHarness(t, nil)
	veto := errors.New("store: swap refused")
	h.setRefuse(veto)
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22"), `"cf-v4-2"`, "")
	err := h.r.Refresh(context.Background())
	must.ErrorIs(t, err, ErrUpdateRefused)
	must.ErrorIs(t, err, veto, "ErrUpdateRefused wraps the hook's error")
	st := h.r.Status()
	must.Equal(t, 22, st.Prefixes)
	must.Equal(t, uint64(1), st.Rejections)
	must.Equal(t, ProvenanceSnapshot, st.Provenance)
	h.setRefuse(nil)
	must.NoError(t, h.r.Refresh(context.Background()), "after the store accepts")
	must.Equal(t, 21, h.r.Status().Prefixes, "after the store accepts")
}

// If OnUpdate refused the starting set, a fetch equal to it must still be
// delivered, or the trust store would never receive it.
func TestRefresherRedeliversRefusedStartingSet(t *testing.T) {
	h := newHarness(t, nil)
	h.setRefuse(errors.New("store not ready"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	must.ErrorIs(t, h.r.Run(ctx), context.Canceled)
	h.setRefuse(nil)
	must.NoError(t, h.r.Refresh(context.Background()))
	must.Equal(t, 1, h.updateCount(), "the unchanged set was not delivered")
	assert.Equal(t, 22, h.lastUpdate().Len(), "the unchanged set was not delivered")
}

func TestRefresherPartialNotModified(t *testing.T) {
	h := newHarness(t, nil)
	must.NoError(t, h.r.Refresh(context.Background()))
	h.v6.serve(snapCloudflareV6+"\n2001:db8::/33", "", "Thu, 01 Jan 2026 00:00:00 GMT")
	must.NoError(t, h.r.Refresh(context.Background()))
	_, inm, _ := h.v4.seen()
	set := h.r.Current()
	if assert.Len(t, inm, 2, "If-None-Match") {
		assert.Equal(t, `"cf-v4-1"`, inm[1], "If-None-Match")
	}
	assert.True(t, set.Contains(netip.MustParseAddr("104.16.0.1")), "IPv4 from a 304: set %s", set)
	assert.True(t, set.Contains(netip.MustParseAddr("2001:db8::1")), "IPv6 from a 200: set %s", set)
	assert.Equal(t, 23, set.Len(), "IPv4 from a 304 plus IPv6 from a 200: set %s", set)
}

func TestRefresherDiskCopy(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cloudflare.json")
	withCache := func(c *RefresherConfig) { c.CacheFile = cache }
	h := newHarness(t, withCache)
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22"), `"cf-v4-2"`, "")
	must.NoError(t, h.r.Refresh(context.Background()))
	fi, err := os.Stat(cache)
	must.NoError(t, err, "disk copy")
	must.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "disk copy")
	// The provider is down when the service restarts: start from disk.
	h.v4.fail(http.StatusServiceUnavailable)
	h.clock.Advance(time.Hour)
	r2, err := NewRefresher(RefresherConfig{Source: h.r.Source(), CacheFile: cache, Client: h.srv.Client(), Clock: h.clock.Now})
	must.NoError(t, err)
	st := r2.Status()
	must.Equal(t, ProvenanceDisk, st.Provenance, "restart from disk")
	must.Equal(t, 21, st.Prefixes, "restart from disk")
	must.WithinDuration(t, t0, st.Confirmed, 0, "restart from disk")
	must.Equal(t, time.Hour, st.Age, "restart from disk")
	must.NoError(t, st.CacheError, "restart from disk")
	must.ErrorIs(t, r2.Refresh(context.Background()), ErrHTTPStatus, "failed refresh")
	must.Equal(t, ProvenanceDisk, r2.Status().Provenance, "failed refresh")
	// The provider is back and unchanged: the validators on disk make it a 304.
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22"), `"cf-v4-2"`, "")
	must.NoError(t, r2.Refresh(context.Background()))
	_, inm, _ := h.v4.seen()
	st = r2.Status()
	assert.Equal(t, `"cf-v4-2"`, inm[len(inm)-1], "after the provider came back: If-None-Match")
	assert.Equal(t, ProvenanceNetwork, st.Provenance, "after the provider came back")
	assert.Equal(t, uint64(1), st.Unchanged, "after the provider came back")
	assert.Equal(t, 21, st.Prefixes, "after the provider came back")
}

// TestRefresherDiskCopyFromTheFuture: a disk copy confirmed after now (a
// clock that ran ahead when it was written, or an edited file) counts as
// confirmed now, so its age grows from the start and Check reports it stale
// once the provider has been unreachable for longer than allowed. Taken as
// it stood, its age read zero until 2099 and every health check passed.
func TestRefresherDiskCopyFromTheFuture(t *testing.T) {
	src := Cloudflare()
	cache := filepath.Join(t.TempDir(), "cache.json")
	must.NoError(t, os.WriteFile(cache, []byte(`{"version": 1, "source": "`+src.String()+`", "confirmed": "2099-01-01T00:00:00Z", "documents": [
		{"location": "https://www.cloudflare.com/ips-v4", "prefixes": ["104.16.0.0/13"]},
		{"location": "https://www.cloudflare.com/ips-v6", "prefixes": ["2606:4700::/32"]}]}`), 0o644))
	clock := newClock(t0)
	r, err := NewRefresher(RefresherConfig{Source: src, CacheFile: cache, Clock: clock.Now})
	must.NoError(t, err)
	st := r.Status()
	must.Equal(t, ProvenanceDisk, st.Provenance)
	assert.Equal(t, t0, st.Confirmed, "confirmed no later than now")
	clock.Advance(2 * time.Hour)
	assert.ErrorIs(t, r.Check(time.Hour), ErrStale, "two hours without the provider")
}

func TestRefresherDiskCopyRefused(t *testing.T) {
	src := Cloudflare()
	var b strings.Builder
	for i := range MaxPrefixes + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + netip.AddrFrom16([16]byte{0x26, 0x06, 0x47, 0x00, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}).String() + `/128"`)
	}
	many := "[" + b.String() + "]"
	valid := func(confirmed, prefix string) string {
		return `{"version": 1, "source": "` + src.String() + `", "confirmed": "` + confirmed + `", "documents": [
			{"location": "https://www.cloudflare.com/ips-v4", "prefixes": ["` + prefix + `"]},
			{"location": "https://www.cloudflare.com/ips-v6", "prefixes": ["2606:4700::/32"]}]}`
	}
	tests := []struct {
		name     string
		content  string // "" for no file
		wantErr  error  // in Status.CacheError; nil when the copy is used or absent
		wantDisk bool
	}{
		{"a valid copy newer than the snapshot", valid("2026-11-30T00:00:00Z", "104.16.0.0/13"), nil, true},
		{"no file yet", "", nil, false},
		{"a copy older than the embedded snapshot", valid("2024-01-01T00:00:00Z", "104.16.0.0/13"), ErrCache, false},
		{"a copy tampered with 0.0.0.0/0", valid("2026-11-30T00:00:00Z", "0.0.0.0/0"), ErrAllAddresses, false},
		{"a copy with private space", valid("2026-11-30T00:00:00Z", "10.0.0.0/8"), ErrPrivate, false},
		{"a copy with host bits set", valid("2026-11-30T00:00:00Z", "104.16.0.1/13"), ErrInvalidPrefix, false},
		{"a copy of another source", strings.Replace(valid("2026-11-30T00:00:00Z", "104.16.0.0/13"), "cloudflare from", "fastly from", 1), ErrCache, false},
		{"a copy with an empty document", strings.Replace(valid("2026-11-30T00:00:00Z", "104.16.0.0/13"), `["2606:4700::/32"]`, `[]`, 1), ErrEmpty, false},
		{"a copy of another version", strings.Replace(valid("2026-11-30T00:00:00Z", "104.16.0.0/13"), `"version": 1`, `"version": 2`, 1), ErrCache, false},
		{"not JSON", "{", ErrCache, false},
		{"a copy of more than MaxPrefixes prefixes", strings.Replace(valid("2026-11-30T00:00:00Z", "104.16.0.0/13"), `["2606:4700::/32"]`, many, 1), ErrTooLarge, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.json")
			if tc.content != "" {
				must.NoError(t, os.WriteFile(path, []byte(tc.content), 0o644))
			}
			r, err := NewRefresher(RefresherConfig{Source: src, CacheFile: path, Clock: newClock(t0).Now})
			must.NoError(t, err)
			st := r.Status()
			must.ErrorIs(t, st.CacheError, tc.wantErr, "CacheError")
			assert.Equal(t, map[bool]Provenance{true: ProvenanceDisk, false: ProvenanceSnapshot}[tc.wantDisk], st.Provenance)
		})
	}
}

// A disk copy that cannot be written costs the copy, not the update.
func TestRefresherCacheWriteFailure(t *testing.T) {
	h := newHarness(t, func(c *RefresherConfig) { c.CacheFile = filepath.Join(t.TempDir(), "missing-dir", "cache.json") })
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22"), `"cf-v4-2"`, "")
	must.NoError(t, h.r.Refresh(context.Background()))
	st := h.r.Status()
	assert.Equal(t, 21, st.Prefixes)
	assert.ErrorIs(t, st.CacheError, ErrCache)
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, content := range []string{"first", "second"} {
		must.NoError(t, writeFileAtomic(path, []byte(content)))
		b, err := os.ReadFile(path)
		must.NoError(t, err)
		must.Equal(t, content, string(b))
	}
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "temporary files left behind")
	assert.Error(t, writeFileAtomic(filepath.Join(dir, "no", "f"), []byte("x")), "writing into a missing directory succeeded")
}

func TestRefresherWithoutSnapshot(t *testing.T) {
	srv := newRangeServer(t, "/edge.txt")
	srv.docs["/edge.txt"].serve("# our edge\n10.20.0.0/16\n", `"1"`, "")
	src, err := NewSource(SourceConfig{Provider: ProviderCIDRList, Locations: []string{srv.URL + "/edge.txt"}})
	must.NoError(t, err)
	r, err := NewRefresher(RefresherConfig{Source: src, Client: srv.Client(), Clock: newClock(t0).Now, AllowPrivate: true})
	must.NoError(t, err)
	must.Equal(t, ProvenanceNone, r.Status().Provenance, "before any fetch")
	must.Zero(t, r.Current().Len(), "before any fetch")
	must.ErrorIs(t, r.Check(0), ErrNoData, "before any fetch")
	must.NoError(t, r.Refresh(context.Background()))
	assert.Equal(t, ProvenanceNetwork, r.Status().Provenance, "after a fetch")
	assert.True(t, r.Current().Contains(netip.MustParseAddr("10.20.1.1")), "after a fetch")
	assert.NoError(t, r.Check(time.Hour), "after a fetch")
}

func TestRefresherCheckAndHealthHandler(t *testing.T) {
	h := newHarness(t, nil)
	probe := func(maxAge time.Duration) (int, string) {
		rec := httptest.NewRecorder()
		h.r.HealthHandler(maxAge).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	// The snapshot is old: stale for a one-day limit, fine without a limit.
	assert.ErrorIs(t, h.r.Check(24*time.Hour), ErrStale, "Check on an old snapshot")
	assert.NoError(t, h.r.Check(0), "staleness must fail only when asked")
	must.NoError(t, h.r.Refresh(context.Background()))
	code, body := probe(time.Hour)
	assert.Equal(t, http.StatusOK, code, "fresh: %q", body)
	assert.True(t, strings.HasPrefix(body, "ok: 22 prefixes from network"), "fresh: %q", body)
	// The provider goes down for two hours: the set is still served.
	h.v4.fail(http.StatusBadGateway)
	h.clock.Advance(2 * time.Hour)
	_ = h.r.Refresh(context.Background())
	code, body = probe(time.Hour)
	assert.Equal(t, http.StatusServiceUnavailable, code, "stale: %q", body)
	assert.Contains(t, body, "stale")
	assert.Contains(t, body, "502")
	assert.Equal(t, 22, h.r.Current().Len(), "staleness dropped the set")
	code, _ = probe(0)
	assert.Equal(t, http.StatusOK, code, "without a maximum age")
}

func TestRefresherJitter(t *testing.T) {
	for _, tc := range []struct {
		rand        float64
		next, retry time.Duration
	}{
		{0, 54 * time.Minute, 4*time.Minute + 30*time.Second},
		{0.5, time.Hour, 5 * time.Minute},
		{0.75, 63 * time.Minute, 5*time.Minute + 15*time.Second},
	} {
		h := newHarness(t, func(c *RefresherConfig) { c.Rand = func() float64 { return tc.rand } })
		must.NoError(t, h.r.Refresh(context.Background()))
		assert.Equal(t, tc.next, h.r.Status().NextRefresh.Sub(t0), "rand %v: next refresh", tc.rand)
		h.v4.fail(http.StatusInternalServerError)
		_ = h.r.Refresh(context.Background())
		assert.Equal(t, tc.retry, h.r.Status().NextRefresh.Sub(t0), "rand %v: retry", tc.rand)
	}
}

// A redirect from https to http would let anyone on the path answer.
func TestRefresherRefusesRedirectToHTTP(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("0.0.0.0/0\n"))
	}))
	defer plain.Close()
	tls := httptest.NewTLSServer(http.RedirectHandler(plain.URL+"/ips-v4", http.StatusFound))
	defer tls.Close()
	src, _ := NewSource(SourceConfig{Provider: ProviderCloudflare, Locations: []string{tls.URL + "/ips-v4"}})
	r, err := NewRefresher(RefresherConfig{Source: src, Client: tls.Client(), Clock: newClock(t0).Now})
	must.NoError(t, err)
	must.ErrorIs(t, r.Refresh(context.Background()), ErrRedirect)
}

func TestRefresherFileLocation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ServiceTags_Public.json")
	mtime := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	write := func(b []byte) {
		t.Helper()
		must.NoError(t, os.WriteFile(path, b, 0o644))
		must.NoError(t, os.Chtimes(path, mtime, mtime))
	}
	write([]byte(snapAzure))
	src, err := AzureFrontDoor(path)
	must.NoError(t, err)
	clock := newClock(t0)
	r, err := NewRefresher(RefresherConfig{Source: src, Clock: clock.Now})
	must.NoError(t, err)
	must.NoError(t, r.Refresh(context.Background()))
	// A file's age is its modification time, so a download job that stops
	// shows up as staleness.
	st := r.Status()
	must.Equal(t, ProvenanceNetwork, st.Provenance)
	must.WithinDuration(t, mtime, st.Confirmed, 0, "confirmed at the file's modification time")
	must.Equal(t, uint64(1), st.Unchanged)
	clock.Advance(time.Hour)
	must.NoError(t, r.Refresh(context.Background()), "unchanged file")
	must.Equal(t, uint64(2), r.Status().Unchanged, "unchanged file")
	must.WithinDuration(t, mtime, r.Status().Confirmed, 0, "unchanged file")
	// A truncated download (the sample keeps 6 of 170 prefixes) is held.
	mtime = mtime.Add(time.Hour)
	write(readFixture(t, "testdata/azure-service-tags-sample.json"))
	must.ErrorIs(t, r.Refresh(context.Background()), ErrShrink)
	must.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	src, _ = AzureFrontDoor(filepath.Join(dir, "d"))
	r, _ = NewRefresher(RefresherConfig{Source: src, Clock: clock.Now})
	assert.ErrorIs(t, r.Refresh(context.Background()), ErrMalformed, "a directory")
}

// TestRefresherFileRewrittenWithSameSizeAndTime: a list file replaced by
// one of the same length whose modification time reads the same (a
// filesystem that keeps seconds, or a copy that preserves times, such as
// cp -p, rsync -t or tar) is read again: size and modification time were
// the file's validator, so the old list stayed trusted until the file
// changed once more.
func TestRefresherFileRewrittenWithSameSizeAndTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxies.txt")
	mtime := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	write := func(list string) {
		t.Helper()
		must.NoError(t, os.WriteFile(path, []byte(list), 0o644))
		must.NoError(t, os.Chtimes(path, mtime, mtime))
	}
	write("198.51.100.0/24\n203.0.113.0/25\n")
	src, err := NewSource(SourceConfig{Provider: ProviderCIDRList, Locations: []string{path}})
	must.NoError(t, err)
	r, err := NewRefresher(RefresherConfig{Source: src, Clock: newClock(t0).Now, MaxShrink: 1, MaxGrowth: math.Inf(1)})
	must.NoError(t, err)
	must.NoError(t, r.Refresh(context.Background()))
	must.Equal(t, "198.51.100.0/24,203.0.113.0/25", r.Current().String())
	write("198.51.100.0/24\n203.0.113.0/26\n")
	must.NoError(t, r.Refresh(context.Background()))
	assert.Equal(t, "198.51.100.0/24,203.0.113.0/26", r.Current().String(), "the list as the file now holds it")
	must.NoError(t, r.Refresh(context.Background()))
	assert.Equal(t, uint64(1), r.Status().Unchanged, "an unchanged file is confirmed, not installed again")
}

func TestRefresherRun(t *testing.T) {
	h := newHarness(t, nil)
	got := make(chan clientip.PrefixSet, 4)
	h.r.onUpdate = func(s clientip.PrefixSet) error { got <- s; return nil }
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22"), `"cf-v4-2"`, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.r.Run(ctx) }()
	assert.Equal(t, 22, (<-got).Len(), "Run first delivers the starting set")
	assert.Equal(t, 21, (<-got).Len(), "then the fetched one")
	assert.ErrorIs(t, h.r.Run(ctx), ErrInvalidConfig, "a second Run")
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled, "Run returned")
}

func TestNewRefresherConfig(t *testing.T) {
	src := Cloudflare()
	tests := []struct {
		name string
		cfg  RefresherConfig
	}{
		{"zero config", RefresherConfig{}},
		{"interval under a minute", RefresherConfig{Source: src, Interval: time.Second}},
		{"retry longer than the interval", RefresherConfig{Source: src, Interval: time.Hour, RetryInterval: 2 * time.Hour}},
		{"retry under ten seconds", RefresherConfig{Source: src, RetryInterval: time.Second}},
		{"negative jitter", RefresherConfig{Source: src, Jitter: -0.1}},
		{"jitter over a half", RefresherConfig{Source: src, Jitter: 0.6}},
		{"NaN jitter", RefresherConfig{Source: src, Jitter: math.NaN()}},
		{"negative timeout", RefresherConfig{Source: src, Timeout: -time.Second}},
		{"MaxBytes over the format's limit", RefresherConfig{Source: src, MaxBytes: MaxCIDRListBytes + 1}},
		{"negative MaxBytes", RefresherConfig{Source: src, MaxBytes: -1}},
		{"MaxShrink over 1", RefresherConfig{Source: src, MaxShrink: 1.5}},
		{"negative MaxShrink", RefresherConfig{Source: src, MaxShrink: -0.1}},
		{"NaN MaxGrowth", RefresherConfig{Source: src, MaxGrowth: math.NaN()}},
		{"negative MaxGrowth", RefresherConfig{Source: src, MaxGrowth: -1}},
		{"NaN MaxTotalGrowth", RefresherConfig{Source: src, MaxTotalGrowth: math.NaN()}},
		{"negative MaxTotalGrowth", RefresherConfig{Source: src, MaxTotalGrowth: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRefresher(tc.cfg)
			must.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
	_, err := NewRefresher(RefresherConfig{Source: src})
	assert.NoError(t, err, "Source alone")
}

// Current is read per request or connection: it must not allocate.
func TestCurrentDoesNotAllocate(t *testing.T) {
	h := newHarness(t, nil)
	a := netip.MustParseAddr("104.16.0.1")
	var in bool
	assert.Zero(t, testing.AllocsPerRun(1000, func() { in = h.r.Current().Contains(a) }), "Current().Contains allocates")
	assert.True(t, in)
}

func TestValidator(t *testing.T) {
	for in, want := range map[string]string{
		`"abc"`:                         `"abc"`,
		`W/"abc"`:                       `W/"abc"`,
		"Tue, 29 Oct 2024 04:30:07 GMT": "Tue, 29 Oct 2024 04:30:07 GMT",
		"a\x00b":                        "",
		"a\rb":                          "",
		strings.Repeat("x", 257):        "",
	} {
		assert.Equal(t, want, validator(in), "validator(%q)", in)
	}
}

func TestStatusLogValue(t *testing.T) {
	h := newHarness(t, nil)
	h.v4.serve("173.245.48.0/20\n", `"cut"`, "")
	_ = h.r.Refresh(context.Background())
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("ranges", "status", h.r.Status())
	for _, want := range []string{"status.provenance=snapshot", "status.prefixes=22", "status.pending=8", "shrank more than allowed"} {
		assert.Contains(t, b.String(), want, "log line")
	}
}

// Each provider's document, in its published format, through a local
// server and a refresher built for that provider.
func TestRefresherProviders(t *testing.T) {
	tests := []struct {
		name     string
		cfg      SourceConfig
		doc      string
		prefixes int
		inside   string
	}{
		{"CloudFront origin-facing from ip-ranges.json", SourceConfig{Provider: ProviderAWS, Services: []string{AWSServiceCloudFrontOriginFacing}},
			snapAWS, 49, "130.176.88.1"},
		{"Google Cloud scope from cloud.json", SourceConfig{Provider: ProviderGoogleCloud, Regions: []string{"africa-south1"}},
			snapGoogleCloud, 5, "34.35.0.1"},
		{"Azure Front Door from a service-tags URL", SourceConfig{Provider: ProviderAzure, Tag: AzureTagFrontDoorBackend},
			snapAzure, 170, "13.73.248.17"},
		{"Fastly public IP list", SourceConfig{Provider: ProviderFastly}, snapFastly, 21, "151.101.1.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRangeServer(t, "/doc")
			srv.docs["/doc"].serve(tc.doc, `"v1"`, "")
			tc.cfg.Locations = []string{srv.URL + "/doc"}
			src, err := NewSource(tc.cfg)
			must.NoError(t, err)
			r, err := NewRefresher(RefresherConfig{Source: src, Client: srv.Client(), Clock: newClock(t0).Now})
			must.NoError(t, err)
			must.NoError(t, r.Refresh(context.Background()))
			st := r.Status()
			assert.Equal(t, ProvenanceNetwork, st.Provenance)
			assert.Equal(t, tc.prefixes, st.Prefixes)
			assert.True(t, r.Current().Contains(netip.MustParseAddr(tc.inside)), "contains %s", tc.inside)
			assert.NoError(t, r.Refresh(context.Background()), "second refresh (304)")
			assert.Equal(t, uint64(2), r.Status().Unchanged, "second refresh (304)")
		})
	}
}
