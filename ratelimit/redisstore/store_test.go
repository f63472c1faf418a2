package redisstore

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/ratelimit"
)

// TestMain silences go-redis's logger, a process-wide setting: the tests
// kill and freeze servers on purpose, and it would print every failed dial.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// client returns a Redis client for addr with the recommended Options.
func client(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(Options(addr))
	t.Cleanup(func() { c.Close() })
	return c
}

// newStore returns the Store of cfg, whose zero Timeout is testTimeout here
// instead of DefaultTimeout: these tests check decisions, not how fast
// Redis answers, and a healthy server's answer that a loaded runner delays
// past 100 ms must not turn into a fallback. The tests of the Timeout set
// their own.
func newStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = testTimeout
	}
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}

// testTimeout bounds a call to a healthy redis-server in these tests.
const testTimeout = 10 * time.Second

var (
	ctx   = context.Background()
	alice = ratelimit.Key{Prefix: netip.MustParsePrefix("198.51.100.7/32")}
	bob   = ratelimit.Key{Prefix: netip.MustParsePrefix("2001:db8:1:2::/64"), Identity: "device 9"}
)

// hour is a Limit so slow that nothing refills during a test.
var hour = ratelimit.Limit{Rate: 1.0 / 3600, Burst: 3}

func take(t *testing.T, s *Store, k ratelimit.Key, n int, maxWait time.Duration) ratelimit.Decision {
	t.Helper()
	d, err := s.Take(ctx, k, time.Now(), n, maxWait)
	require.NoError(t, err)
	return d
}

// takeAfterOutage takes a token from k once the server answers again: a
// pooled connection the outage left (to a frozen or killed process) may
// fail first, so it tries up to three times and returns the last decision.
func takeAfterOutage(t *testing.T, s *Store, k ratelimit.Key) ratelimit.Decision {
	t.Helper()
	var d ratelimit.Decision
	for range 3 {
		if d = take(t, s, k, 1, 0); !d.Fallback {
			break
		}
	}
	return d
}

// TestTake pins the script's decisions on a real redis-server.
func TestTake(t *testing.T) {
	r := e2e.StartRedis(t, e2e.RedisConfig{})
	s := newStore(t, Config{Client: client(t, r.Addr()), Limit: hour})
	for want := 2; want >= 0; want-- {
		d := take(t, s, alice, 1, 0)
		assert.True(t, d.Allowed)
		assert.Equal(t, want, d.Remaining)
		assert.False(t, d.Fallback)
		assert.InDelta(t, time.Hour, d.Refill, float64(time.Minute))
	}
	d := take(t, s, alice, 1, 0)
	assert.False(t, d.Allowed, "the burst is spent")
	assert.InDelta(t, time.Hour, d.RetryAfter, float64(time.Minute))
	d = take(t, s, alice, 2, 90*time.Minute)
	assert.False(t, d.Allowed, "two tokens take two hours")
	assert.InDelta(t, 2*time.Hour, d.RetryAfter, float64(time.Minute))
	d = take(t, s, alice, 1, 90*time.Minute)
	assert.True(t, d.Allowed, "reserved from the future")
	assert.InDelta(t, time.Hour, d.Delay, float64(time.Minute))
	d = take(t, s, alice, 1, 90*time.Minute)
	assert.False(t, d.Allowed, "queued behind the reservation: two hours")

	assert.True(t, take(t, s, bob, 3, 0).Allowed, "another key has its own bucket")
	_, err := s.Take(ctx, bob, time.Now(), 4, time.Hour)
	assert.ErrorIs(t, err, ratelimit.ErrExceedsBurst)
	st := s.Stats()
	assert.Equal(t, Stats{Calls: 8, Allowed: 5, Refused: 3}, st)
}

// TestKeys: a bucket's key is the prefix and the Key's text, and it
// expires when the bucket is full again, so idle clients cost nothing.
func TestKeys(t *testing.T) {
	r := e2e.StartRedis(t, e2e.RedisConfig{})
	c := client(t, r.Addr())
	s := newStore(t, Config{Client: c, Limit: hour, Prefix: "test:"})
	take(t, s, bob, 2, 0)
	ttl, err := c.PTTL(ctx, `test:2001:db8:1:2::/64 "device 9"`).Result()
	require.NoError(t, err)
	assert.InDelta(t, 2*time.Hour, ttl, float64(time.Minute), "full again after two tokens' time")

	fast := newStore(t, Config{Client: c, Limit: ratelimit.Limit{Rate: 1000, Burst: 1}, Prefix: "fast:"})
	take(t, fast, alice, 1, 0)
	ttl, err = c.PTTL(ctx, "fast:198.51.100.7/32").Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, ttl, 2*time.Millisecond)
	keys, err := c.Keys(ctx, "sourceip:*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys)
}

// TestServerClock: the replicas' clocks do not matter: Take ignores its
// now and uses the server's, so two replicas a century apart share one
// bucket exactly.
func TestServerClock(t *testing.T) {
	r := e2e.StartRedis(t, e2e.RedisConfig{})
	s1 := newStore(t, Config{Client: client(t, r.Addr()), Limit: hour})
	s2 := newStore(t, Config{Client: client(t, r.Addr()), Limit: hour})
	past, future := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC)
	var allowed int
	for i := range 6 {
		s, now := s1, past
		if i%2 == 1 {
			s, now = s2, future
		}
		d, err := s.Take(ctx, alice, now, 1, 0)
		require.NoError(t, err)
		if d.Allowed {
			allowed++
		}
	}
	assert.Equal(t, hour.Burst, allowed)
}

// TestFailure: with redis-server gone, each Failure mode decides as
// documented, and says the decision was a fallback.
func TestFailure(t *testing.T) {
	r := e2e.StartRedis(t, e2e.RedisConfig{})
	c := client(t, r.Addr())
	local := newStore(t, Config{Client: c, Limit: hour, FallbackLimit: ratelimit.Limit{Rate: 1.0 / 3600, Burst: 2}})
	open := newStore(t, Config{Client: c, Limit: hour, Failure: FailOpen})
	closed := newStore(t, Config{Client: c, Limit: hour, Failure: FailClosed})
	r.Kill()

	var allowed int
	for range 5 {
		d := take(t, local, alice, 1, 0)
		assert.True(t, d.Fallback)
		if d.Allowed {
			allowed++
		}
	}
	assert.Equal(t, 2, allowed, "FailLocal: the fallback's burst")

	for range 5 {
		d := take(t, open, alice, 1, 0)
		assert.True(t, d.Allowed && d.Fallback, "FailOpen")
	}

	_, err := closed.Take(ctx, alice, time.Now(), 1, 0)
	assert.ErrorIs(t, err, ratelimit.ErrUnavailable, "FailClosed")
	assert.Equal(t, uint64(1), closed.Stats().Refused)
	st := local.Stats()
	assert.Equal(t, uint64(5), st.Fallbacks)
	assert.Equal(t, uint64(DefaultFailureThreshold), st.Errors, "the breaker opened after the threshold")
	assert.True(t, st.BreakerOpen)
	assert.Error(t, st.LastError)
	assert.Equal(t, 1, st.Local.Keys)
}

// TestBreaker: against a server that accepts connections but answers
// nothing (frozen with SIGSTOP, as behind a partition), only the first
// FailureThreshold events wait for the Timeout; the rest go to the
// fallback without calling Redis. Once the server answers again, the
// probe after Cooldown closes the breaker, also when an earlier probe's
// context had ended. Counted, not timed.
func TestBreaker(t *testing.T) {
	r := e2e.StartRedis(t, e2e.RedisConfig{})
	c := client(t, r.Addr())
	// A pooled connection and the script loaded, through a store whose
	// Timeout a loaded runner cannot outlast: the first call (a dial,
	// EVALSHA, NOSCRIPT, EVAL) is no event of the breaker under test.
	require.False(t, take(t, newStore(t, Config{Client: c, Limit: hour}), alice, 1, 0).Fallback, "warm-up")
	s := newStore(t, Config{Client: c, Limit: hour, Timeout: 50 * time.Millisecond, FailureThreshold: 2, Cooldown: time.Hour})
	r.Freeze()
	for range 20 {
		assert.True(t, take(t, s, alice, 1, 0).Fallback)
	}
	st := s.Stats()
	assert.Equal(t, uint64(2), st.Errors, "events after the threshold must not call the frozen server")
	assert.Equal(t, uint64(20), st.Fallbacks)
	assert.Equal(t, uint64(1), st.BreakerOpens)
	r.Thaw()
	assert.True(t, take(t, s, alice, 1, 0).Fallback, "open for the whole cooldown")

	probing := newStore(t, Config{Client: c, Limit: hour, Timeout: 50 * time.Millisecond, FailureThreshold: 1, Cooldown: time.Nanosecond})
	r.Freeze()
	assert.True(t, take(t, probing, bob, 1, 0).Fallback)
	r.Thaw()
	d := takeAfterOutage(t, probing, bob)
	assert.False(t, d.Fallback, "the probe closed the breaker")
	assert.False(t, probing.Stats().BreakerOpen)

	// The probe may be an event whose context has already ended (a client
	// that went away). That says nothing about Redis, and must not leave
	// the breaker waiting for the probe's answer forever: the next event
	// probes instead.
	r.Freeze()
	assert.True(t, take(t, probing, bob, 1, 0).Fallback)
	r.Thaw()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := probing.Take(canceled, bob, time.Now(), 1, 0)
	require.ErrorIs(t, err, context.Canceled)
	d = takeAfterOutage(t, probing, bob)
	assert.False(t, d.Fallback, "a canceled probe: a later probe closed the breaker")
	assert.False(t, probing.Stats().BreakerOpen)
}

// TestScriptAfterRestart: a restarted server has no script cache; the
// store loads the script again (EVALSHA, then EVAL on NOSCRIPT).
func TestScriptAfterRestart(t *testing.T) {
	r := e2e.StartRedis(t, e2e.RedisConfig{Persist: true})
	s := newStore(t, Config{Client: client(t, r.Addr()), Limit: hour})
	take(t, s, alice, 3, 0)
	r.Kill()
	r.Restart()
	d := takeAfterOutage(t, s, alice)
	assert.False(t, d.Fallback)
	assert.False(t, d.Allowed, "the persisted bucket is still empty")
}

func TestNewInvalid(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no client", Config{Limit: hour}},
		{"no limit", Config{Client: c}},
		{"unlimited", Config{Client: c, Limit: ratelimit.Limit{Rate: ratelimit.Inf, Burst: 1}}},
		{"rate above a token per microsecond", Config{Client: c, Limit: ratelimit.Limit{Rate: 2e6, Burst: 1}}},
		{"unknown failure mode", Config{Client: c, Limit: hour, Failure: 9}},
		{"negative timeout", Config{Client: c, Limit: hour, Timeout: -1}},
		{"invalid fallback", Config{Client: c, Limit: hour, FallbackLimit: ratelimit.Limit{Rate: 1}}},
	}
	for _, tc := range tests {
		_, err := New(tc.cfg)
		assert.ErrorIs(t, err, ratelimit.ErrInvalidConfig, tc.name)
	}
}

func TestFailureText(t *testing.T) {
	for _, f := range []Failure{FailLocal, FailOpen, FailClosed} {
		b, err := f.MarshalText()
		require.NoError(t, err)
		var g Failure
		require.NoError(t, g.UnmarshalText(b))
		assert.Equal(t, f, g)
	}
	assert.Equal(t, "closed", FailClosed.String())
	assert.Error(t, new(Failure).UnmarshalText([]byte("sometimes")))
	_, err := Failure(9).MarshalText()
	assert.Error(t, err)
}
