package ranges

import (
	"context"
	"errors"
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
	if err != nil {
		t.Fatal(err)
	}
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
	if h.r, err = NewRefresher(cfg); err != nil {
		t.Fatal(err)
	}
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
	if st.Provenance != ProvenanceSnapshot || st.Prefixes != 22 || !st.Confirmed.Equal(cloudflareSnapshotDate) || st.Age != t0.Sub(cloudflareSnapshotDate) {
		t.Errorf("status = %+v", st)
	}
	if n, _, _ := h.v4.seen(); n != 0 {
		t.Errorf("NewRefresher touched the network: %d requests", n)
	}
	if !h.r.Current().Contains(netip.MustParseAddr("104.16.0.1")) {
		t.Error("Current is not the snapshot")
	}
}

func TestRefresherConditionalRequests(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.r.Status()
	if st.Provenance != ProvenanceNetwork || !st.Confirmed.Equal(t0) || st.Unchanged != 1 || st.Updates != 0 || h.updateCount() != 1 {
		t.Fatalf("after a fetch equal to the snapshot: %+v, %d updates", st, h.updateCount())
	}
	h.clock.Advance(time.Hour)
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, inm, _ := h.v4.seen()
	_, _, ims := h.v6.seen()
	if inm[0] != "" || inm[1] != `"cf-v4-1"` {
		t.Errorf("ips-v4 If-None-Match = %q, want none then the ETag", inm)
	}
	if ims[0] != "" || ims[1] != "Wed, 11 Oct 2023 18:30:17 GMT" {
		t.Errorf("ips-v6 If-Modified-Since = %q, want none then the Last-Modified", ims)
	}
	st = h.r.Status()
	if st.Unchanged != 2 || !st.Confirmed.Equal(t0.Add(time.Hour)) || st.Age != 0 || h.updateCount() != 1 {
		t.Errorf("after 304s: %+v, %d updates (a 304 must not call OnUpdate again)", st, h.updateCount())
	}
}

// A server that answers 304 to a request without validators is broken or
// hostile; the refresher has nothing the 304 could refer to.
func TestRefresherRefusesUnconditional304(t *testing.T) {
	h := newHarness(t, nil)
	h.v4.fail(http.StatusNotModified)
	if err := h.r.Refresh(context.Background()); !errors.Is(err, ErrHTTPStatus) {
		t.Fatalf("err = %v, want ErrHTTPStatus", err)
	}
}

func TestRefresherInstallsChange(t *testing.T) {
	h := newHarness(t, nil)
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22")+"\n", `"cf-v4-2"`, "")
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := h.r.Status()
	if st.Updates != 1 || st.Prefixes != 21 || h.updateCount() != 1 || h.lastUpdate().Len() != 21 {
		t.Fatalf("status %+v, %d updates", st, h.updateCount())
	}
	if h.r.Current().Contains(netip.MustParseAddr("131.0.72.1")) {
		t.Error("the dropped prefix is still trusted")
	}
	if !st.NextRefresh.Equal(t0.Add(time.Hour)) || st.LastError != nil || !st.LastSuccess.Equal(t0) {
		t.Errorf("schedule after success: %+v", st)
	}
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
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			st := h.r.Status()
			if st.Provenance != ProvenanceSnapshot || st.Prefixes != 22 || h.updateCount() != 0 {
				t.Errorf("the set changed: %+v, %d updates", st, h.updateCount())
			}
			if !errors.Is(st.LastError, tc.wantErr) || !st.LastErrorTime.Equal(t0) || st.ConsecutiveFailures != 1 {
				t.Errorf("status does not report the error: %+v", st)
			}
			if tc.rejection && (st.Rejections != 1 || st.Failures != 0) || !tc.rejection && (st.Failures != 1 || st.Rejections != 0) {
				t.Errorf("counted as failures=%d rejections=%d", st.Failures, st.Rejections)
			}
			if !st.NextRefresh.Equal(t0.Add(5 * time.Minute)) {
				t.Errorf("retry at %s, want after RetryInterval", st.NextRefresh)
			}
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
	err := h.r.Refresh(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	if st := h.r.Status(); st.Provenance != ProvenanceSnapshot || st.Failures != 1 {
		t.Errorf("status %+v", st)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	if r.Current().Len() != 0 {
		t.Errorf("the cut body was installed: %s", r.Current())
	}
}

func TestRefresherShrinkGuard(t *testing.T) {
	h := newHarness(t, nil)
	// A truncated ips-v4: two of fifteen prefixes.
	h.v4.serve("173.245.48.0/20\n103.21.244.0/22\n", `"cf-v4-cut"`, "")
	err := h.r.Refresh(context.Background())
	if !errors.Is(err, ErrShrink) {
		t.Fatalf("err = %v, want ErrShrink", err)
	}
	st := h.r.Status()
	if st.Prefixes != 22 || st.Pending != 9 || st.PendingChange.Shrink < 0.9 || st.PendingChange.ShrinkFamily != "IPv4" || h.updateCount() != 0 {
		t.Fatalf("status %+v", st)
	}
	if !st.NextRefresh.Equal(t0.Add(time.Hour)) {
		t.Errorf("a set waiting for a person is looked at again after Interval, not RetryInterval: %s", st.NextRefresh)
	}
	h.clock.Advance(time.Minute)
	if err := h.r.AcceptPending(); err != nil {
		t.Fatal(err)
	}
	st = h.r.Status()
	if st.Prefixes != 9 || st.Pending != 0 || st.Provenance != ProvenanceNetwork || !st.Confirmed.Equal(t0) || h.updateCount() != 1 || st.Updates != 1 {
		t.Errorf("after AcceptPending: %+v, %d updates", st, h.updateCount())
	}
	if err := h.r.AcceptPending(); !errors.Is(err, ErrNoPending) {
		t.Errorf("second AcceptPending: %v, want ErrNoPending", err)
	}
}

func TestRefresherGrowthGuard(t *testing.T) {
	grown := snapCloudflareV4 + "\n44.0.0.0/10" // 4M addresses on top of Cloudflare's 1.5M
	h := newHarness(t, nil)
	h.v4.serve(grown, `"cf-v4-grown"`, "")
	if err := h.r.Refresh(context.Background()); !errors.Is(err, ErrGrowth) {
		t.Fatalf("err = %v, want ErrGrowth", err)
	}
	if h.r.Current().Contains(netip.MustParseAddr("44.0.0.1")) {
		t.Fatal("the refused prefix is trusted")
	}
	h = newHarness(t, func(c *RefresherConfig) { c.MaxGrowth = math.Inf(1) })
	h.v4.serve(grown, `"cf-v4-grown"`, "")
	if err := h.r.Refresh(context.Background()); err != nil || !h.r.Current().Contains(netip.MustParseAddr("44.0.0.1")) {
		t.Fatalf("with the guard off: %v", err)
	}
}

// A pending set is dropped when the provider goes back to the current list.
func TestRefresherPendingClearedByGoodRefresh(t *testing.T) {
	h := newHarness(t, nil)
	h.v4.serve("173.245.48.0/20\n", `"cf-v4-cut"`, "")
	if err := h.r.Refresh(context.Background()); !errors.Is(err, ErrShrink) {
		t.Fatal(err)
	}
	h.v4.serve(snapCloudflareV4, `"cf-v4-1"`, "")
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.r.AcceptPending(); !errors.Is(err, ErrNoPending) || h.r.Status().Pending != 0 {
		t.Errorf("AcceptPending = %v, pending %d", err, h.r.Status().Pending)
	}
}

// OnUpdate is the trust store's veto: a set it refuses is not installed.
func TestRefresherOnUpdateRefusal(t *testing.T) {
	h := newHarness(t, nil)
	veto := errors.New("store: swap refused")
	h.setRefuse(veto)
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22"), `"cf-v4-2"`, "")
	err := h.r.Refresh(context.Background())
	if !errors.Is(err, ErrUpdateRefused) || !errors.Is(err, veto) {
		t.Fatalf("err = %v, want ErrUpdateRefused wrapping the hook's error", err)
	}
	if st := h.r.Status(); st.Prefixes != 22 || st.Rejections != 1 || st.Provenance != ProvenanceSnapshot {
		t.Fatalf("status %+v", st)
	}
	h.setRefuse(nil)
	if err := h.r.Refresh(context.Background()); err != nil || h.r.Status().Prefixes != 21 {
		t.Fatalf("after the store accepts: %v, %d prefixes", err, h.r.Status().Prefixes)
	}
}

// If OnUpdate refused the starting set, a fetch equal to it must still be
// delivered, or the trust store would never receive it.
func TestRefresherRedeliversRefusedStartingSet(t *testing.T) {
	h := newHarness(t, nil)
	h.setRefuse(errors.New("store not ready"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.r.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	h.setRefuse(nil)
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.updateCount() != 1 || h.lastUpdate().Len() != 22 {
		t.Errorf("the unchanged set was not delivered: %d updates", h.updateCount())
	}
}

func TestRefresherPartialNotModified(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.v6.serve(snapCloudflareV6+"\n2001:db8::/33", "", "Thu, 01 Jan 2026 00:00:00 GMT")
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, inm, _ := h.v4.seen()
	set := h.r.Current()
	if len(inm) != 2 || inm[1] != `"cf-v4-1"` || !set.Contains(netip.MustParseAddr("104.16.0.1")) || !set.Contains(netip.MustParseAddr("2001:db8::1")) || set.Len() != 23 {
		t.Errorf("IPv4 from a 304 plus IPv6 from a 200: If-None-Match %q, set %s", inm, set)
	}
}

func TestRefresherDiskCopy(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cloudflare.json")
	withCache := func(c *RefresherConfig) { c.CacheFile = cache }
	h := newHarness(t, withCache)
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22"), `"cf-v4-2"`, "")
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(cache)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("disk copy: %v, %v", fi, err)
	}
	// The provider is down when the service restarts: start from disk.
	h.v4.fail(http.StatusServiceUnavailable)
	h.clock.Advance(time.Hour)
	r2, err := NewRefresher(RefresherConfig{Source: h.r.Source(), CacheFile: cache, Client: h.srv.Client(), Clock: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	st := r2.Status()
	if st.Provenance != ProvenanceDisk || st.Prefixes != 21 || !st.Confirmed.Equal(t0) || st.Age != time.Hour || st.CacheError != nil {
		t.Fatalf("restart from disk: %+v", st)
	}
	if err := r2.Refresh(context.Background()); !errors.Is(err, ErrHTTPStatus) || r2.Status().Provenance != ProvenanceDisk {
		t.Fatalf("failed refresh: %v, %+v", err, r2.Status())
	}
	// The provider is back and unchanged: the validators on disk make it a 304.
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22"), `"cf-v4-2"`, "")
	if err := r2.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, inm, _ := h.v4.seen()
	if st := r2.Status(); inm[len(inm)-1] != `"cf-v4-2"` || st.Provenance != ProvenanceNetwork || st.Unchanged != 1 || st.Prefixes != 21 {
		t.Errorf("after the provider came back: If-None-Match %q, %+v", inm[len(inm)-1], st)
	}
}

func TestRefresherDiskCopyRefused(t *testing.T) {
	src := Cloudflare()
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.json")
			if tc.content != "" {
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r, err := NewRefresher(RefresherConfig{Source: src, CacheFile: path, Clock: newClock(t0).Now})
			if err != nil {
				t.Fatal(err)
			}
			st := r.Status()
			if !errors.Is(st.CacheError, tc.wantErr) || (tc.wantErr == nil) != (st.CacheError == nil) {
				t.Fatalf("CacheError = %v, want %v", st.CacheError, tc.wantErr)
			}
			if want := map[bool]Provenance{true: ProvenanceDisk, false: ProvenanceSnapshot}[tc.wantDisk]; st.Provenance != want {
				t.Errorf("provenance %v, want %v", st.Provenance, want)
			}
		})
	}
}

// A disk copy that cannot be written costs the copy, not the update.
func TestRefresherCacheWriteFailure(t *testing.T) {
	h := newHarness(t, func(c *RefresherConfig) { c.CacheFile = filepath.Join(t.TempDir(), "missing-dir", "cache.json") })
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22"), `"cf-v4-2"`, "")
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := h.r.Status(); st.Prefixes != 21 || !errors.Is(st.CacheError, ErrCache) {
		t.Errorf("status %+v", st)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, content := range []string{"first", "second"} {
		if err := writeFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			t.Fatalf("read %q, %v", b, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := writeFileAtomic(filepath.Join(dir, "no", "f"), []byte("x")); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func TestRefresherWithoutSnapshot(t *testing.T) {
	srv := newRangeServer(t, "/edge.txt")
	srv.docs["/edge.txt"].serve("# our edge\n10.20.0.0/16\n", `"1"`, "")
	src, err := NewSource(SourceConfig{Provider: ProviderCIDRList, Locations: []string{srv.URL + "/edge.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRefresher(RefresherConfig{Source: src, Client: srv.Client(), Clock: newClock(t0).Now, AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := r.Status(); st.Provenance != ProvenanceNone || r.Current().Len() != 0 || !errors.Is(r.Check(0), ErrNoData) {
		t.Fatalf("before any fetch: %+v, Check = %v", st, r.Check(0))
	}
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.Status().Provenance != ProvenanceNetwork || !r.Current().Contains(netip.MustParseAddr("10.20.1.1")) || r.Check(time.Hour) != nil {
		t.Errorf("after a fetch: %+v", r.Status())
	}
}

func TestRefresherCheckAndHealthHandler(t *testing.T) {
	h := newHarness(t, nil)
	probe := func(maxAge time.Duration) (int, string) {
		rec := httptest.NewRecorder()
		h.r.HealthHandler(maxAge).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	// The snapshot is old: stale for a one-day limit, fine without a limit.
	if err := h.r.Check(24 * time.Hour); !errors.Is(err, ErrStale) {
		t.Errorf("Check on an old snapshot = %v, want ErrStale", err)
	}
	if err := h.r.Check(0); err != nil {
		t.Errorf("Check(0) = %v: staleness must fail only when asked", err)
	}
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := probe(time.Hour); code != http.StatusOK || !strings.HasPrefix(body, "ok: 22 prefixes from network") {
		t.Errorf("fresh: %d %q", code, body)
	}
	// The provider goes down for two hours: the set is still served.
	h.v4.fail(http.StatusBadGateway)
	h.clock.Advance(2 * time.Hour)
	_ = h.r.Refresh(context.Background())
	code, body := probe(time.Hour)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "stale") || !strings.Contains(body, "502") {
		t.Errorf("stale: %d %q", code, body)
	}
	if h.r.Current().Len() != 22 {
		t.Error("staleness dropped the set")
	}
	if code, _ := probe(0); code != http.StatusOK {
		t.Errorf("without a maximum age: %d", code)
	}
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
		if err := h.r.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := h.r.Status().NextRefresh.Sub(t0); got != tc.next {
			t.Errorf("rand %v: next refresh in %s, want %s", tc.rand, got, tc.next)
		}
		h.v4.fail(http.StatusInternalServerError)
		_ = h.r.Refresh(context.Background())
		if got := h.r.Status().NextRefresh.Sub(t0); got != tc.retry {
			t.Errorf("rand %v: retry in %s, want %s", tc.rand, got, tc.retry)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(context.Background()); !errors.Is(err, ErrRedirect) {
		t.Fatalf("err = %v, want ErrRedirect", err)
	}
}

func TestRefresherFileLocation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ServiceTags_Public.json")
	mtime := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write([]byte(snapAzure))
	src, err := AzureFrontDoor(path)
	if err != nil {
		t.Fatal(err)
	}
	clock := newClock(t0)
	r, err := NewRefresher(RefresherConfig{Source: src, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A file's age is its modification time, so a download job that stops
	// shows up as staleness.
	if st := r.Status(); st.Provenance != ProvenanceNetwork || !st.Confirmed.Equal(mtime) || st.Unchanged != 1 {
		t.Fatalf("status %+v", st)
	}
	clock.Advance(time.Hour)
	if err := r.Refresh(context.Background()); err != nil || r.Status().Unchanged != 2 || !r.Status().Confirmed.Equal(mtime) {
		t.Fatalf("unchanged file: %v %+v", err, r.Status())
	}
	// A truncated download (the sample keeps 6 of 170 prefixes) is held.
	mtime = mtime.Add(time.Hour)
	write(readFixture(t, "testdata/azure-service-tags-sample.json"))
	if err := r.Refresh(context.Background()); !errors.Is(err, ErrShrink) {
		t.Fatalf("err = %v, want ErrShrink", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	src, _ = AzureFrontDoor(filepath.Join(dir, "d"))
	r, _ = NewRefresher(RefresherConfig{Source: src, Clock: clock.Now})
	if err := r.Refresh(context.Background()); !errors.Is(err, ErrMalformed) {
		t.Errorf("a directory: %v", err)
	}
}

func TestRefresherRun(t *testing.T) {
	h := newHarness(t, nil)
	got := make(chan clientip.PrefixSet, 4)
	h.r.onUpdate = func(s clientip.PrefixSet) error { got <- s; return nil }
	h.v4.serve(without(snapCloudflareV4, "131.0.72.0/22"), `"cf-v4-2"`, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.r.Run(ctx) }()
	if s := <-got; s.Len() != 22 {
		t.Errorf("Run first delivers the starting set: %d prefixes", s.Len())
	}
	if s := <-got; s.Len() != 21 {
		t.Errorf("then the fetched one: %d prefixes", s.Len())
	}
	if err := h.r.Run(ctx); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a second Run: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v", err)
	}
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewRefresher(tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := NewRefresher(RefresherConfig{Source: src}); err != nil {
		t.Errorf("Source alone: %v", err)
	}
}

// Current is read per request or connection: it must not allocate.
func TestCurrentDoesNotAllocate(t *testing.T) {
	h := newHarness(t, nil)
	a := netip.MustParseAddr("104.16.0.1")
	var in bool
	if n := testing.AllocsPerRun(1000, func() { in = h.r.Current().Contains(a) }); n != 0 || !in {
		t.Errorf("Current().Contains allocates %v times (in=%v)", n, in)
	}
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
		if got := validator(in); got != want {
			t.Errorf("validator(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStatusLogValue(t *testing.T) {
	h := newHarness(t, nil)
	h.v4.serve("173.245.48.0/20\n", `"cut"`, "")
	_ = h.r.Refresh(context.Background())
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("ranges", "status", h.r.Status())
	for _, want := range []string{"status.provenance=snapshot", "status.prefixes=22", "status.pending=8", "shrank more than allowed"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("log line lacks %q: %s", want, b.String())
		}
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
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewRefresher(RefresherConfig{Source: src, Client: srv.Client(), Clock: newClock(t0).Now})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := r.Status()
			if st.Provenance != ProvenanceNetwork || st.Prefixes != tc.prefixes || !r.Current().Contains(netip.MustParseAddr(tc.inside)) {
				t.Errorf("status %+v", st)
			}
			if err := r.Refresh(context.Background()); err != nil || r.Status().Unchanged != 2 {
				t.Errorf("second refresh (304): %v, %+v", err, r.Status())
			}
		})
	}
}
