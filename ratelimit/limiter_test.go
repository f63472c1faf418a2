package ratelimit

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1000, 0)

func mustNew(t testing.TB, rate float64, burst, maxKeys int) *Limiter {
	t.Helper()
	l, err := New(Config{Limit: Limit{Rate: rate, Burst: burst}, MaxKeys: maxKeys})
	require.NoError(t, err)
	return l
}

func TestReserve(t *testing.T) {
	l := mustNew(t, 10, 2, 0)
	k := Key{Prefix: netip.MustParsePrefix("192.0.2.1/32")}
	steps := []struct {
		at      time.Duration
		maxWait time.Duration
		delay   time.Duration
		ok      bool
	}{
		{0, 0, 0, true},                                                               // burst
		{0, 0, 0, true},                                                               // burst
		{0, 50 * time.Millisecond, 0, false},                                          // would wait 100ms: refused, nothing taken
		{0, time.Second, 100 * time.Millisecond, true},                                // reserved: wait 100ms
		{0, time.Second, 200 * time.Millisecond, true},                                // queued behind it
		{time.Second, 0, 0, true},                                                     // refilled
		{time.Second, 0, 0, true},                                                     // and again
		{time.Second, 10 * time.Millisecond, 0, false},                                // empty
		{time.Second + 50*time.Millisecond, 0, 0, false},                              // half a token
		{time.Second + 100*time.Millisecond, 0, 0, true},                              // a whole one
		{time.Second + 100*time.Millisecond, time.Hour, 100 * time.Millisecond, true}, // the next one, reserved
	}
	for i, s := range steps {
		d := l.ReserveAt(k, t0.Add(s.at), s.maxWait)
		assert.Equal(t, s.ok, d.Allowed, "step %d", i)
		assert.InDelta(t, s.delay, d.Delay, float64(time.Millisecond), "step %d", i)
	}
	other := Key{Prefix: k.Prefix, Identity: "d2"}
	assert.True(t, l.AllowAt(other, t0), "an identity gets its own bucket")
}

// TestDecision pins what a Decision reports: the whole tokens left, the
// time to the next one, and for a refusal the time until the tokens asked
// for are there.
func TestDecision(t *testing.T) {
	l := mustNew(t, 2, 3, 0) // a token every 500ms
	k := Key{Prefix: netip.MustParsePrefix("198.51.100.7/32")}
	ms := time.Millisecond
	tests := []struct {
		name string
		at   time.Duration
		n    int
		want Decision
	}{
		{"first event of a full bucket", 0, 1, Decision{Allowed: true, Remaining: 2, Refill: 500 * ms}},
		{"two more empty it", 0, 2, Decision{Allowed: true, Remaining: 0, Refill: 500 * ms}},
		{"refused: a token in 500ms", 0, 1, Decision{Remaining: 0, RetryAfter: 500 * ms, Refill: 500 * ms}},
		{"refused for two: 1s", 0, 2, Decision{Remaining: 0, RetryAfter: time.Second, Refill: 500 * ms}},
		{"a quarter later, half a token", 250 * ms, 1, Decision{Remaining: 0, RetryAfter: 250 * ms, Refill: 250 * ms}},
		{"a whole token later", 500 * ms, 1, Decision{Allowed: true, Remaining: 0, Refill: 500 * ms}},
		{"asking for nothing reports the bucket", 1750 * ms, 0, Decision{Allowed: true, Remaining: 2, Refill: 250 * ms}},
		{"a full bucket: the next token after one is used", time.Hour, 0, Decision{Allowed: true, Remaining: 3, Refill: 500 * ms}},
	}
	for _, tc := range tests {
		d, err := l.Take(context.Background(), k, t0.Add(tc.at), tc.n, 0)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, d, tc.name)
	}
}

func TestDecisionWindow(t *testing.T) {
	assert.Equal(t, time.Second, Decision{Allowed: true, Refill: time.Second, RetryAfter: time.Hour}.Window())
	assert.Equal(t, time.Hour, Decision{Refill: time.Second, RetryAfter: time.Hour}.Window())
}

// TestZeroLimiterFailsClosed: the zero Limiter and a nil *Limiter refuse
// every event, like golang.org/x/time/rate's zero Limiter.
func TestZeroLimiterFailsClosed(t *testing.T) {
	for name, l := range map[string]*Limiter{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			assert.False(t, l.AllowAt(Key{}, t0))
			assert.False(t, l.ReserveAt(Key{}, t0, time.Hour).Allowed)
			_, err := l.Take(context.Background(), Key{}, t0, 1, 0)
			assert.ErrorIs(t, err, ErrExceedsBurst)
			assert.ErrorIs(t, l.Wait(context.Background(), Key{}), ErrExceedsBurst)
			assert.Equal(t, 0, l.Len())
			assert.Equal(t, Stats{}, l.Stats())
			assert.Equal(t, Limit{}, l.Limit())
		})
	}
}

func TestUnlimited(t *testing.T) {
	l := mustNew(t, Inf, 5, 0)
	for range 1000 {
		require.True(t, l.AllowAt(Key{}, t0))
	}
	assert.Equal(t, 0, l.Len(), "an unlimited Limiter keeps no buckets")
	assert.Equal(t, "unlimited", l.Limit().String())
}

func TestNewInvalid(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"zero config", Config{}},
		{"zero rate", Config{Limit: Limit{Burst: 1}}},
		{"negative rate", Config{Limit: Limit{Rate: -1, Burst: 1}}},
		{"infinite rate (use Inf)", Config{Limit: Limit{Rate: posInf(), Burst: 1}}},
		{"zero burst", Config{Limit: Limit{Rate: 1}}},
		{"negative MaxKeys", Config{Limit: Limit{Rate: 1, Burst: 1}, MaxKeys: -1}},
	}
	for _, tc := range tests {
		_, err := New(tc.cfg)
		assert.ErrorIs(t, err, ErrInvalidConfig, tc.name)
	}
}

func posInf() float64 { z := 0.0; return 1 / z }

func TestTakeOutOfRange(t *testing.T) {
	l := mustNew(t, 1, 3, 0)
	for _, n := range []int{-1, 4} {
		_, err := l.Take(context.Background(), Key{}, t0, n, time.Hour)
		assert.ErrorIs(t, err, ErrExceedsBurst, "n=%d", n)
	}
	assert.Equal(t, 0, l.Len(), "nothing was taken")
}

func TestLimitHelpers(t *testing.T) {
	l := Limit{Rate: 10, Burst: 20}
	assert.Equal(t, 2*time.Second, l.Window())
	assert.Equal(t, time.Second, Limit{Rate: 100, Burst: 5}.Window(), "at least a second")
	assert.Equal(t, 10*time.Second, Limit{Rate: 0.5, Burst: 5}.Window())
	assert.Equal(t, Limit{Rate: 10.0 / 3, Burst: 6}, l.Split(3))
	assert.Equal(t, Limit{Rate: 0.1, Burst: 1}, Limit{Rate: 1, Burst: 5}.Split(10), "burst at least 1")
	assert.Equal(t, l, l.Split(1))
	assert.Equal(t, "10/s burst 20", l.String())
}

func TestKeyString(t *testing.T) {
	tests := []struct {
		key  Key
		want string
	}{
		{Key{Prefix: netip.MustParsePrefix("198.51.100.7/32")}, "198.51.100.7/32"},
		{Key{Prefix: netip.MustParsePrefix("2001:db8:1:2::/64")}, "2001:db8:1:2::/64"},
		{Key{Prefix: netip.MustParsePrefix("192.0.2.1/32"), Identity: "dev 1"}, `192.0.2.1/32 "dev 1"`},
		// An identity that reads like another key's text stays apart.
		{Key{Prefix: netip.MustParsePrefix("192.0.2.1/32"), Identity: `" 10.0.0.1/32`}, `192.0.2.1/32 "\" 10.0.0.1/32"`},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, tc.key.String())
	}
}

// TestAllowDoesNotAllocate: an event on a key the Limiter holds costs no
// allocation, whether allowed, refused or reserved.
func TestAllowDoesNotAllocate(t *testing.T) {
	l := mustNew(t, 1, 5, 0)
	k := Key{Prefix: netip.MustParsePrefix("2001:db8::/64"), Identity: "device-7"}
	now := t0
	l.AllowAt(k, now)
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		l.AllowAt(k, now)
		l.ReserveAt(k, now, time.Second)
	}))
}

// TestWaitGivesBackOnCancel: a wait ended by its context returns the
// reserved token, so the next reservation queues behind one wait, not two.
// A Limiter is safe for concurrent use, as documented: goroutines racing
// for the same buckets at one instant get exactly Burst events per key
// between them (no token spent twice, none lost), and racing new keys past
// MaxKeys, with readers of Len and Stats, leave at most MaxKeys buckets.
// Run with -race.
func TestLimiterConcurrent(t *testing.T) {
	const burst, keys, workers, events = 50, 4, 8, 100
	l := mustNew(t, 1, burst, 8)
	key := func(i int) Key {
		return Key{Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)}), 128)}
	}
	var allowed [keys]atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for e := range events {
				k := (w + e) % keys
				if l.AllowAt(key(k), t0) {
					allowed[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		assert.Equal(t, int64(burst), allowed[k].Load(), "events allowed on key %d", k)
	}
	st := l.Stats()
	assert.Equal(t, uint64(keys*burst), st.Allowed)
	assert.Equal(t, uint64(workers*events-keys*burst), st.Refused)

	for w := range workers {
		wg.Go(func() {
			for e := range events {
				l.ReserveAt(key(w*events+e), t0.Add(time.Duration(e)*time.Millisecond), time.Second)
				_, _ = l.Len(), l.Stats()
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, l.Len(), 8)
	assert.Equal(t, l.Len(), l.Stats().Keys)
}

func TestWaitGivesBackOnCancel(t *testing.T) {
	l := mustNew(t, 1.0/3600, 1, 0) // a token an hour
	k := Key{Prefix: netip.MustParsePrefix("192.0.2.9/32")}
	require.True(t, l.Allow(k))
	ctx, cancel := context.WithCancel(context.Background())
	sc := &doneSignal{Context: ctx, reached: make(chan struct{})}
	errc := make(chan error, 1)
	go func() { errc <- l.Wait(sc, k) }()
	<-sc.reached // Wait has reserved its token and is waiting
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	d := l.Reserve(k, 3*time.Hour)
	require.True(t, d.Allowed)
	assert.Less(t, d.Delay, time.Hour+time.Minute, "the cancelled wait's token was not given back")
}

// doneSignal closes reached the first time Done is called: Wait calls it
// only once it has reserved its token.
type doneSignal struct {
	context.Context
	reached chan struct{}
	once    sync.Once
}

func (c *doneSignal) Done() <-chan struct{} {
	c.once.Do(func() { close(c.reached) })
	return c.Context.Done()
}

func TestWaitTooLong(t *testing.T) {
	l := mustNew(t, 1.0/3600, 1, 0)
	k := Key{Prefix: netip.MustParsePrefix("192.0.2.10/32")}
	require.True(t, l.Allow(k))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := l.Wait(ctx, k)
	require.ErrorIs(t, err, ErrWaitTooLong)
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
	assert.Equal(t, uint64(1), l.Stats().Refused)
}

func TestWaitReturns(t *testing.T) {
	l := mustNew(t, 1000, 1, 0)
	k := Key{Prefix: netip.MustParsePrefix("192.0.2.11/32")}
	for range 3 { // the second and third wait about a millisecond
		require.NoError(t, l.Wait(context.Background(), k))
	}
	assert.Equal(t, uint64(3), l.Stats().Allowed)
}

// TestWindowExtremeLimit: a valid Limit whose Burst/Rate does not fit a
// Duration (a huge burst, a tiny rate) saturates its Window instead of
// overflowing to a wrapped value that RateLimit-Policy would announce as
// one second.
func TestWindowExtremeLimit(t *testing.T) {
	for _, l := range []Limit{
		{Rate: 1, Burst: math.MaxInt},
		{Rate: 1e-12, Burst: 1},
		{Rate: 1e-300, Burst: 10},
	} {
		require.NoError(t, l.Valid())
		assert.Equal(t, time.Duration(math.MaxInt64), l.Window(), l.String())
	}
}
