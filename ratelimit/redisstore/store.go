package redisstore

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sourceip/sourceip/ratelimit"
)

//go:embed gcra.lua
var gcraSource string

// Defaults for the zero fields of [Config].
const (
	DefaultPrefix           = "sourceip:ratelimit:"
	DefaultTimeout          = 100 * time.Millisecond
	DefaultFailureThreshold = 3
	DefaultCooldown         = time.Second
)

// maxRate is the highest Rate a Store takes: the script counts time in
// whole microseconds per token.
const maxRate = 1e6

// Config configures a [Store].
type Config struct {
	// Client reaches Redis or Valkey: a *redis.Client, *redis.ClusterClient
	// or *redis.Ring. Required. Create it from [Options] (or with
	// ContextTimeoutEnabled, so that Timeout bounds each call, no retries
	// and one dial attempt): the Store has its own answer to failures, and
	// retries only make an outage slower.
	Client redis.Scripter

	// Limit is the shape of every bucket. Required; Rate at most 1e6 per
	// second (the script counts whole microseconds per token) and not
	// ratelimit.Inf.
	Limit ratelimit.Limit

	// Prefix starts every key; "" means [DefaultPrefix]. Give each policy
	// its own prefix: keys hold the state of one Limit. A bucket's key is
	// Prefix followed by the text of its ratelimit.Key.
	Prefix string

	// Timeout bounds one call to Redis, as far as the client honours its
	// context; zero means [DefaultTimeout]. A call that times out counts as
	// a failure.
	Timeout time.Duration

	// Failure says what to decide while Redis is unreachable; the zero
	// value is [FailLocal].
	Failure Failure

	// FallbackLimit is the Limit of the local buckets FailLocal decides
	// from; the zero Limit means Limit. With N replicas, Limit.Split(N)
	// keeps what a client can get across all of them near Limit.
	FallbackLimit ratelimit.Limit

	// FallbackMaxKeys bounds the local buckets; zero means
	// ratelimit.DefaultMaxKeys.
	FallbackMaxKeys int

	// FailureThreshold is the number of consecutive failed calls that open
	// the circuit breaker; zero means [DefaultFailureThreshold]. Cooldown
	// is how long it stays open before one call probes Redis again; zero
	// means [DefaultCooldown].
	FailureThreshold int
	Cooldown         time.Duration
}

// Store is a [ratelimit.Store] whose buckets live in Redis (or Valkey), so
// that every replica of a service shares them. Each Take is one atomic
// script (GCRA) on the server's clock. It is safe for concurrent use.
type Store struct {
	client   redis.Scripter
	limit    ratelimit.Limit
	exact    ratelimit.Limit // limit with the rate the script really uses
	interval int64           // microseconds per token
	prefix   string
	timeout  time.Duration
	failure  Failure
	script   *redis.Script
	local    *ratelimit.Limiter
	breaker  breaker

	calls, allowed, refused, errs, fallbacks atomic.Uint64
	lastErr                                  errMemo
}

// New returns a Store for cfg, or an error wrapping
// ratelimit.ErrInvalidConfig.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: Client is required", ratelimit.ErrInvalidConfig)
	}
	if err := cfg.Limit.Valid(); err != nil {
		return nil, err
	}
	if cfg.Limit.Rate > maxRate {
		return nil, fmt.Errorf("%w: Rate %v is above %v per second", ratelimit.ErrInvalidConfig, cfg.Limit.Rate, maxRate)
	}
	interval := int64(math.Round(1e6 / cfg.Limit.Rate))
	if float64(interval)*float64(cfg.Limit.Burst) > 1<<50 {
		return nil, fmt.Errorf("%w: %v: a full bucket takes too long to fill", ratelimit.ErrInvalidConfig, cfg.Limit)
	}
	if cfg.Failure > FailClosed {
		return nil, fmt.Errorf("%w: unknown Failure %d", ratelimit.ErrInvalidConfig, cfg.Failure)
	}
	if cfg.Timeout < 0 || cfg.Cooldown < 0 || cfg.FailureThreshold < 0 {
		return nil, fmt.Errorf("%w: negative Timeout, Cooldown or FailureThreshold", ratelimit.ErrInvalidConfig)
	}
	s := &Store{
		client:   cfg.Client,
		limit:    cfg.Limit,
		exact:    ratelimit.Limit{Rate: 1e6 / float64(interval), Burst: cfg.Limit.Burst},
		interval: interval,
		prefix:   cmp.Or(cfg.Prefix, DefaultPrefix),
		timeout:  cmp.Or(cfg.Timeout, DefaultTimeout),
		failure:  cfg.Failure,
		script:   redis.NewScript(gcraSource),
		breaker: breaker{
			threshold: cmp.Or(cfg.FailureThreshold, DefaultFailureThreshold),
			cooldown:  cmp.Or(cfg.Cooldown, DefaultCooldown),
		},
	}
	if cfg.Failure == FailLocal {
		fl := cfg.FallbackLimit
		if fl == (ratelimit.Limit{}) {
			fl = cfg.Limit
		}
		var err error
		if s.local, err = ratelimit.New(ratelimit.Config{Limit: fl, MaxKeys: cfg.FallbackMaxKeys}); err != nil {
			return nil, fmt.Errorf("FallbackLimit: %w", err)
		}
	}
	return s, nil
}

// Limit returns the Limit s enforces.
func (s *Store) Limit() ratelimit.Limit { return s.limit }

// Take implements [ratelimit.Store]: it takes n tokens from key's bucket in
// Redis, on the server's clock (now is used only by the local fallback),
// or reserves them when they are there within maxWait. While Redis is
// unreachable it decides as Config.Failure says, with Decision.Fallback
// set; under FailClosed it returns an error wrapping
// ratelimit.ErrUnavailable. When ctx ends first it returns ctx's error,
// which does not count against Redis.
func (s *Store) Take(ctx context.Context, key ratelimit.Key, now time.Time, n int, maxWait time.Duration) (ratelimit.Decision, error) {
	if n < 0 || n > s.limit.Burst {
		return ratelimit.Decision{}, fmt.Errorf("%w: %d tokens asked, burst %d", ratelimit.ErrExceedsBurst, n, s.limit.Burst)
	}
	s.calls.Add(1)
	var cause error
	if s.breaker.allow(time.Now()) {
		d, err := s.remote(ctx, key, n, maxWait)
		if err == nil {
			s.breaker.success()
			return s.count(d), nil
		}
		if ctx.Err() != nil {
			s.breaker.abandon()
			return ratelimit.Decision{}, ctx.Err()
		}
		s.breaker.failure(time.Now())
		s.errs.Add(1)
		s.lastErr.set(err)
		cause = err
	} else {
		cause = errBreakerOpen
	}
	s.fallbacks.Add(1)
	switch s.failure {
	case FailOpen:
		return s.count(ratelimit.Decision{Allowed: true, Remaining: s.limit.Burst, Refill: time.Duration(s.interval) * time.Microsecond, Fallback: true}), nil
	case FailClosed:
		s.refused.Add(1)
		return ratelimit.Decision{}, fmt.Errorf("%w: %w", ratelimit.ErrUnavailable, cause)
	}
	d, err := s.local.Take(ctx, key, now, n, maxWait)
	d.Fallback = true
	return s.count(d), err
}

var errBreakerOpen = errors.New("redisstore: circuit breaker open after failed calls")

func (s *Store) count(d ratelimit.Decision) ratelimit.Decision {
	if d.Allowed {
		s.allowed.Add(1)
	} else {
		s.refused.Add(1)
	}
	return d
}

// remote runs the script for key.
func (s *Store) remote(ctx context.Context, key ratelimit.Key, n int, maxWait time.Duration) (ratelimit.Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	name, _ := key.AppendText([]byte(s.prefix))
	wait := min(maxWait.Microseconds(), 1<<52)
	r, err := s.script.Run(ctx, s.client, []string{string(name)}, s.interval, s.limit.Burst, n, wait).Int64Slice()
	if err != nil {
		return ratelimit.Decision{}, err
	}
	if len(r) != 3 {
		return ratelimit.Decision{}, fmt.Errorf("redisstore: the script returned %d values, want 3", len(r))
	}
	d := s.exact.Describe(float64(r[2]) / float64(s.interval))
	if r[0] == 1 {
		d.Allowed, d.Delay = true, time.Duration(r[1])*time.Microsecond
	} else {
		d.RetryAfter = time.Duration(r[1]) * time.Microsecond
	}
	return d, nil
}

// Stats counts what a [Store] did since it was made; the counters only
// grow. Exporters turn them into metrics.
type Stats struct {
	// Calls counts Take calls with a valid n.
	Calls uint64
	// Allowed and Refused count decisions, from Redis or the fallback;
	// Refused includes FailClosed refusals.
	Allowed, Refused uint64
	// Errors counts calls to Redis that failed or timed out.
	Errors uint64
	// Fallbacks counts decisions made without Redis: after a failed call,
	// or while the breaker was open.
	Fallbacks uint64
	// BreakerOpen reports whether the circuit breaker is open now (events
	// go to the fallback without calling Redis); BreakerOpens counts the
	// times it opened.
	BreakerOpen  bool
	BreakerOpens uint64
	// LastError is the last failed call's error, or nil.
	LastError error
	// Local is the local fallback's own Stats (zero unless FailLocal).
	Local ratelimit.Stats
}

// Stats returns s's counters.
func (s *Store) Stats() Stats {
	st := Stats{
		Calls:     s.calls.Load(),
		Allowed:   s.allowed.Load(),
		Refused:   s.refused.Load(),
		Errors:    s.errs.Load(),
		Fallbacks: s.fallbacks.Load(),
		LastError: s.lastErr.get(),
		Local:     s.local.Stats(),
	}
	st.BreakerOpen, st.BreakerOpens = s.breaker.state()
	return st
}

// errMemo holds the last error.
type errMemo struct {
	mu  sync.Mutex
	err error
}

func (m *errMemo) set(err error) {
	m.mu.Lock()
	m.err = err
	m.mu.Unlock()
}

func (m *errMemo) get() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}
