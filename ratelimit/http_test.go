package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
)

// The test deployment: proxies in 10.0.0.0/8 append X-Forwarded-For, and
// nodes in 192.168.0.0/16 masquerade clients.
func testTrust(tb testing.TB) *clientip.Resolver {
	tb.Helper()
	r, err := clientip.New(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"),
		Header:         "X-Forwarded-For",
		Masquerade:     clientip.MustParsePrefixSet("192.168.0.0/16"),
	})
	require.NoError(tb, err)
	return r
}

func request(remote string, xff ...string) *http.Request {
	r := httptest.NewRequest("GET", "http://example/", nil)
	r.RemoteAddr = remote
	if xff != nil {
		r.Header["X-Forwarded-For"] = xff
	}
	return r
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

func newHTTP(tb testing.TB, cfg HTTPConfig) http.Handler {
	tb.Helper()
	if cfg.Trust == nil {
		cfg.Trust = testTrust(tb)
	}
	if cfg.Store == nil {
		cfg.Store = mustNew(tb, 1.0/60, 2, 0) // 2 at once, then one a minute
	}
	h, err := NewHTTP(cfg)
	require.NoError(tb, err)
	return h.Handler(okHandler)
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestHTTPLimitsResolvedClient: the bucket is the resolved client's, not
// the proxy's and not a forged header entry's.
func TestHTTPLimitsResolvedClient(t *testing.T) {
	h := newHTTP(t, HTTPConfig{})
	via := func(xff string) *http.Request { return request("10.0.0.1:4000", xff) }
	codes := func(rs ...*http.Request) (out []int) {
		for _, r := range rs {
			out = append(out, serve(h, r).Code)
		}
		return out
	}
	assert.Equal(t, []int{204, 204, 429}, codes(via("198.51.100.7"), via("198.51.100.7"), via("198.51.100.7")))
	// A forged leftmost entry does not buy a new bucket.
	assert.Equal(t, []int{429, 429}, codes(via("203.0.113.99, 198.51.100.7"), via("1.2.3.4, 198.51.100.7")))
	// Another client behind the same proxy has its own bucket.
	assert.Equal(t, []int{204}, codes(via("198.51.100.8")))
	// An IPv6 client is keyed by its /64: rotating the interface id does not help.
	assert.Equal(t, []int{204, 204, 429}, codes(via("2001:db8:1:2::1"), via("2001:db8:1:2::2"), via("2001:db8:1:2:ffff::3")))
	// A direct client is keyed by its socket address, its headers unread.
	assert.Equal(t, []int{204, 204, 429}, codes(request("203.0.113.5:1", "198.51.100.50"), request("203.0.113.5:2", "198.51.100.51"), request("203.0.113.5:3")))
}

// TestHTTPHeaders pins the fields of draft-ietf-httpapi-ratelimit-headers-12
// on allowed and refused responses, and Retry-After on a refusal.
func TestHTTPHeaders(t *testing.T) {
	h := newHTTP(t, HTTPConfig{Store: mustNew(t, 1.0/60, 2, 0), Name: "per-client"})
	r := func() *http.Request { return request("203.0.113.5:1") }
	w := serve(h, r())
	assert.Equal(t, []string{`"per-client";q=2;w=120`}, w.Header()["Ratelimit-Policy"])
	assert.Equal(t, []string{`"per-client";a=1;w=60`}, w.Header()["Ratelimit"])
	assert.Empty(t, w.Header().Get("Retry-After"))
	serve(h, r())
	w = serve(h, r())
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, []string{`"per-client";q=2;w=120`}, w.Header()["Ratelimit-Policy"])
	ra := w.Header().Get("Retry-After")
	assert.Contains(t, []string{"59", "60"}, ra)
	assert.Equal(t, []string{`"per-client";a=0;w=` + ra}, w.Header()["Ratelimit"],
		"Retry-After must not end before the effective window")
}

func TestHTTPQuietWhenAllowed(t *testing.T) {
	h := newHTTP(t, HTTPConfig{QuietWhenAllowed: true})
	w := serve(h, request("203.0.113.5:1"))
	assert.Empty(t, w.Header()["Ratelimit"])
	serve(h, request("203.0.113.5:1"))
	w = serve(h, request("203.0.113.5:1"))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.NotEmpty(t, w.Header()["Ratelimit"], "a refusal always says why")
}

// TestHTTPUnresolved: a request whose chain cannot be read takes no token
// and gets 400; it is never limited on the proxy's address.
func TestHTTPUnresolved(t *testing.T) {
	store := mustNew(t, 1, 2, 0)
	h := newHTTP(t, HTTPConfig{Store: store})
	for _, r := range []*http.Request{
		request("10.0.0.1:1", "not-an-ip"),
		request("10.0.0.1:1", "10.0.0.2"), // every hop trusted
		request("10.0.0.1:1"),             // a trusted proxy that wrote nothing
		request("garbage"),
	} {
		w := serve(h, r)
		assert.Equal(t, http.StatusBadRequest, w.Code, "%s %q", r.RemoteAddr, r.Header["X-Forwarded-For"])
		assert.Empty(t, w.Header()["Ratelimit"])
	}
	assert.Equal(t, 0, store.Len())
}

// TestHTTPMasqueraded: a client masqueraded by a node is limited on the
// node's key by default (every client behind the node shares the bucket,
// none escapes it), or refused with RefuseMasqueraded.
func TestHTTPMasqueraded(t *testing.T) {
	h := newHTTP(t, HTTPConfig{})
	codes := []int{}
	for i := range 3 {
		codes = append(codes, serve(h, request(fmt.Sprintf("192.168.1.1:%d", 1000+i))).Code)
	}
	assert.Equal(t, []int{204, 204, 429}, codes, "masqueraded clients share the node's bucket")

	h = newHTTP(t, HTTPConfig{RefuseMasqueraded: true})
	w := serve(h, request("192.168.1.1:1000"))
	assert.Equal(t, http.StatusForbidden, w.Code)
}

// TestHTTPIdentity: Identity narrows the bucket.
func TestHTTPIdentity(t *testing.T) {
	h := newHTTP(t, HTTPConfig{Identity: func(r *http.Request, _ clientip.Result) string { return r.Header.Get("X-Verified-User") }})
	user := func(u string) *http.Request {
		r := request("203.0.113.5:1")
		r.Header.Set("X-Verified-User", u)
		return r
	}
	assert.Equal(t, 204, serve(h, user("a")).Code)
	assert.Equal(t, 204, serve(h, user("a")).Code)
	assert.Equal(t, 429, serve(h, user("a")).Code)
	assert.Equal(t, 204, serve(h, user("b")).Code)
}

// failingStore fails closed, like a shared store in an outage.
type failingStore struct{}

func (failingStore) Take(context.Context, Key, time.Time, int, time.Duration) (Decision, error) {
	return Decision{}, fmt.Errorf("%w: connection refused", ErrUnavailable)
}
func (failingStore) Limit() Limit { return Limit{Rate: 1, Burst: 1} }

func TestHTTPStoreError(t *testing.T) {
	h := newHTTP(t, HTTPConfig{Store: failingStore{}})
	assert.Equal(t, http.StatusServiceUnavailable, serve(h, request("203.0.113.5:1")).Code)

	var got error
	h = newHTTP(t, HTTPConfig{Store: failingStore{}, OnError: func(w http.ResponseWriter, _ *http.Request, err error) {
		got = err
		w.WriteHeader(http.StatusTeapot)
	}})
	assert.Equal(t, http.StatusTeapot, serve(h, request("203.0.113.5:1")).Code)
	assert.ErrorIs(t, got, ErrUnavailable)
}

func TestHTTPCheck(t *testing.T) {
	hl, err := NewHTTP(HTTPConfig{Trust: testTrust(t), Store: mustNew(t, 1.0/60, 1, 0)})
	require.NoError(t, err)
	d, err := hl.Check(request("203.0.113.5:1"))
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	d, err = hl.Check(request("203.0.113.5:1"))
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	_, err = hl.Check(request("10.0.0.1:1", "bad"))
	assert.ErrorIs(t, err, ErrUnresolved)
	assert.ErrorIs(t, err, clientip.ErrMalformed)
}

// TestHTTPRequestUnchanged: the middleware passes the caller's request on
// as it came: no copy, no new context.
func TestHTTPRequestUnchanged(t *testing.T) {
	hl, err := NewHTTP(HTTPConfig{Trust: testTrust(t), Store: mustNew(t, 1, 5, 0)})
	require.NoError(t, err)
	in := request("203.0.113.5:1")
	var seen *http.Request
	hl.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = r })).ServeHTTP(httptest.NewRecorder(), in)
	assert.Same(t, in, seen)
}

func TestNewHTTPInvalid(t *testing.T) {
	trust, store := testTrust(t), mustNew(t, 1, 1, 0)
	tests := []struct {
		name string
		cfg  HTTPConfig
	}{
		{"zero config", HTTPConfig{}},
		{"no trust", HTTPConfig{Store: store}},
		{"no store", HTTPConfig{Trust: trust}},
		{"a nil *clientip.Store (a variable never set): refused, not a panic", HTTPConfig{Trust: (*clientip.Store)(nil), Store: store}},
		{"the zero Limiter", HTTPConfig{Trust: trust, Store: &Limiter{}}},
		{"a name that needs escaping", HTTPConfig{Trust: trust, Store: store, Name: `a"b`}},
		{"a keyer out of range", HTTPConfig{Trust: trust, Store: store, Keyer: clientip.Keyer{IPv6Bits: 129}}},
		{"a negative keyer length", HTTPConfig{Trust: trust, Store: store, Keyer: clientip.Keyer{IPv4Bits: -1}}},
		{"a NAT64 prefix RFC 6052 does not allow", HTTPConfig{Trust: trust, Store: store, Keyer: clientip.Keyer{NAT64: netip.MustParsePrefix("64:ff9b:1::/80")}}},
	}
	for _, tc := range tests {
		_, err := NewHTTP(tc.cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, tc.name)
	}
}

// TestHTTPAllowedDoesNotAllocate: an allowed request on a held key costs
// the middleware nothing on the heap: resolution, the bucket and the
// RateLimit fields all come without allocation.
func TestHTTPAllowedDoesNotAllocate(t *testing.T) {
	h := newHTTP(t, HTTPConfig{Store: mustNew(t, 1e9, 100, 0)})
	r := request("10.0.0.1:4000", "198.51.100.7")
	w := &headerWriter{h: http.Header{}}
	h.ServeHTTP(w, r)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) }))
	assert.Equal(t, http.StatusNoContent, w.code)
}

// TestHTTPConnContext: behind a server whose ConnContext attached the
// connection's layers (clientip.NewConnContext, as middleware.ConnContext
// does), the limiter reads the peer from them, not from r.RemoteAddr, and
// still allocates nothing.
func TestHTTPConnContext(t *testing.T) {
	h := newHTTP(t, HTTPConfig{Store: mustNew(t, 1.0/60, 1, 0)})
	onConn := func(peer string) *http.Request {
		ctx := clientip.NewConnContext(context.Background(), testTrust(t), clientip.Transport{Peer: netip.MustParseAddrPort(peer)})
		r := request("192.0.2.99:1") // not the connection's peer
		return r.WithContext(ctx)
	}
	assert.Equal(t, 204, serve(h, onConn("203.0.113.5:1")).Code)
	assert.Equal(t, 429, serve(h, onConn("203.0.113.5:2")).Code, "same peer, same bucket")
	assert.Equal(t, 204, serve(h, onConn("203.0.113.6:1")).Code, "the peer is read from the connection")

	fast := newHTTP(t, HTTPConfig{Store: mustNew(t, 1e9, 100, 0)})
	r := onConn("10.0.0.1:4000")
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	w := &headerWriter{h: http.Header{}}
	fast.ServeHTTP(w, r)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { fast.ServeHTTP(w, r) }))
	assert.Equal(t, http.StatusNoContent, w.code)
}

// TestHTTPReusesHeldResolution: behind a middleware that holds the request's
// resolution under the same trust (a policy), the limiter keys on the client
// that middleware judged, and holds it for its own handler.
func TestHTTPReusesHeldResolution(t *testing.T) {
	trust := testTrust(t)
	lim, err := NewHTTP(HTTPConfig{Trust: trust, Store: mustNew(t, 1.0/60, 1, 0)})
	require.NoError(t, err)
	var inHandler clientip.Result
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inHandler, _ = clientip.FromRequest(r)
		w.WriteHeader(http.StatusNoContent)
	}))
	policy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held := clientip.HoldRequest(r, nil)
		defer held.Release()
		r.Header.Set("X-Forwarded-For", "203.0.113.99") // too late: the client was judged
		h.ServeHTTP(w, r)
	})
	onConn := func() *http.Request {
		ctx := clientip.NewConnContext(context.Background(), trust, clientip.Transport{Peer: netip.MustParseAddrPort("10.0.0.1:4000")})
		return request("192.0.2.99:1", "198.51.100.7").WithContext(ctx)
	}
	assert.Equal(t, 204, serve(policy, onConn()).Code)
	assert.Equal(t, netip.MustParseAddr("198.51.100.7"), inHandler.Client)
	assert.Equal(t, 429, serve(policy, onConn()).Code, "keyed on the judged client, not the rewritten header")
}

// headerWriter is a ResponseWriter that keeps one header map.
type headerWriter struct {
	h    http.Header
	code int
}

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerWriter) WriteHeader(code int)        { w.code = code }

func TestSetHeaders(t *testing.T) {
	h := http.Header{}
	SetHeaders(h, "api", Limit{Rate: 10, Burst: 20}, Decision{Remaining: 0, RetryAfter: 1500 * time.Millisecond, Refill: 100 * time.Millisecond})
	assert.Equal(t, `"api";q=20;w=2`, h.Get("RateLimit-Policy"))
	assert.Equal(t, `"api";a=0;w=2`, h.Get("RateLimit"))
	assert.Equal(t, "2", h.Get("Retry-After"))

	h = http.Header{}
	SetHeaders(h, "api", Limit{Rate: 10, Burst: 20}, Decision{Allowed: true, Remaining: 19, Refill: 100 * time.Millisecond})
	assert.Equal(t, `"api";a=19;w=1`, h.Get("RateLimit"))
	assert.Empty(t, h.Get("Retry-After"))
}

// TestFieldCacheMatchesSetHeaders: the table the middleware uses writes
// what SetHeaders writes, for every decision shape.
func TestFieldCacheMatchesSetHeaders(t *testing.T) {
	lim := Limit{Rate: 0.4, Burst: 3} // a token every 2.5 s: windows 1 to 3 s cached
	c := newFieldCache("p", lim)
	for _, d := range []Decision{
		{Allowed: true, Remaining: 2, Refill: 2500 * time.Millisecond},
		{Allowed: true, Remaining: 0, Refill: 300 * time.Millisecond},
		{Allowed: true, Remaining: 3, Refill: 2 * time.Second},
		{Remaining: 0, RetryAfter: 7 * time.Second, Refill: 2 * time.Second},
		{Allowed: true, Remaining: 9, Refill: 20 * time.Second, Fallback: true}, // outside the table
	} {
		want, got := http.Header{}, http.Header{}
		SetHeaders(want, "p", lim, d)
		c.set(got, "p", d)
		assert.Equal(t, want, got, "%+v", d)
	}
}

func TestValidPolicyName(t *testing.T) {
	assert.NoError(t, ValidPolicyName("per-client_v1.2:api/x"))
	for _, bad := range []string{"", `a"`, `a\b`, "a b", "é", string(make([]byte, 65))} {
		assert.True(t, errors.Is(ValidPolicyName(bad), ErrInvalidConfig), "%q", bad)
	}
}

// TestNewHTTPHugeBurst: a valid Limit with a burst near math.MaxInt must
// not overflow the size check of the RateLimit field table; it once wrapped
// negative and NewHTTP panicked in make.
func TestNewHTTPHugeBurst(t *testing.T) {
	for _, burst := range []int{math.MaxInt, math.MaxInt / 2, math.MaxInt/3 + 1} {
		store := mustNew(t, 1.0/3, burst, 0) // a window of 3 seconds
		h, err := NewHTTP(HTTPConfig{Trust: testTrust(t), Store: store})
		require.NoError(t, err, "burst %d", burst)
		w := serve(h.Handler(okHandler), request("203.0.113.7:1000"))
		assert.Equal(t, http.StatusNoContent, w.Code, "burst %d", burst)
	}
}
