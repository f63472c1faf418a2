package redisstore

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/ratelimit"
)

// The service under test: three replicas of an HTTP service, each with
// its own store, behind a real HAProxy that balances requests round robin
// and appends X-Forwarded-For (option forwardfor). HAProxy connects to the
// replicas from 127.0.0.1, their only trusted proxy; clients come from
// other loopback addresses, one per phase, so phases do not share buckets.
const replicas = 3

// testLimit is a burst of 10 that refills by one a minute: nothing refills
// during a test of a few seconds, and the bounds below add what could.
var testLimit = ratelimit.Limit{Rate: 1.0 / 60, Burst: 10}

type replica struct {
	store    ratelimit.Store
	received atomic.Int64 // requests that reached the replica
	passed   atomic.Int64 // requests the limit let through
	port     int
}

// startReplicas starts n HTTP servers, each limiting with the store that
// newStore returns for it.
func startReplicas(t *testing.T, newStore func(i int) ratelimit.Store) []*replica {
	t.Helper()
	trust, err := clientip.New(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32"), // HAProxy
		Header:         "X-Forwarded-For",
	})
	require.NoError(t, err)
	rs := make([]*replica, replicas)
	for i := range rs {
		rp := &replica{store: newStore(i)}
		limiter, err := ratelimit.NewHTTP(ratelimit.HTTPConfig{Trust: trust, Store: rp.store})
		require.NoError(t, err)
		inner := limiter.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			rp.passed.Add(1)
		}))
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		rp.port = l.Addr().(*net.TCPAddr).Port
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rp.received.Add(1)
			inner.ServeHTTP(w, r)
		}), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		rs[i] = rp
	}
	return rs
}

// startLB runs HAProxy with one frontend per group of replicas and returns
// the frontends' addresses.
func startLB(t *testing.T, groups ...[]*replica) []string {
	t.Helper()
	ports := e2e.StartHAProxy(t, len(groups), func(ports []int) string {
		var b strings.Builder
		b.WriteString("global\n    nbthread 1\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n")
		for g, rs := range groups {
			fmt.Fprintf(&b, "frontend fe%d\n    bind 127.0.0.1:%d\n    option forwardfor\n    default_backend be%d\n", g, ports[g], g)
			fmt.Fprintf(&b, "backend be%d\n    balance roundrobin\n", g)
			for i, r := range rs {
				fmt.Fprintf(&b, "    server r%d 127.0.0.1:%d source 127.0.0.1\n", i, r.port)
			}
		}
		return b.String()
	})
	addrs := make([]string, len(ports))
	for i, p := range ports {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return addrs
}

// send sends n requests from client (a loopback address) to the frontend
// at lb, each on a new connection, and returns how many were allowed (200)
// and refused (429). Anything else fails the test.
func send(t *testing.T, client, lb string, n int) (allowed, refused int) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(client)}, Timeout: 5 * time.Second}
	c := &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		Timeout:   10 * time.Second,
	}
	for range n {
		resp, err := c.Get("http://" + lb + "/")
		require.NoError(t, err)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			allowed++
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("%s: %s", client, resp.Status)
		}
	}
	return allowed, refused
}

// refill bounds what the limit lets through beyond its burst over elapsed.
func refill(lim ratelimit.Limit, elapsed time.Duration) int {
	return int(lim.Rate * elapsed.Seconds())
}

func received(rs []*replica) (out []int64) {
	for _, r := range rs {
		out = append(out, r.received.Load())
	}
	return out
}

// TestReplicasShareOneLimit: a client whose requests HAProxy spreads over
// three replicas gets its limit with the Redis store — not three times it,
// which is what it gets from per-replica buckets.
func TestReplicasShareOneLimit(t *testing.T) {
	r := e2e.StartRedis(t, e2e.RedisConfig{})
	shared := startReplicas(t, func(int) ratelimit.Store {
		return newStore(t, Config{Client: client(t, r.Addr()), Limit: testLimit, FallbackLimit: testLimit.Split(replicas)})
	})
	local := startReplicas(t, func(int) ratelimit.Store {
		l, err := ratelimit.New(ratelimit.Config{Limit: testLimit})
		require.NoError(t, err)
		return l
	})
	lb := startLB(t, shared, local)
	const n = 3 * 10

	start := time.Now()
	allowed, refused := send(t, "127.0.0.21", lb[0], n)
	bound := testLimit.Burst + refill(testLimit, time.Since(start))
	t.Logf("shared store: %d allowed, %d refused; replicas received %v", allowed, refused, received(shared))
	assert.Equal(t, []int64{n / replicas, n / replicas, n / replicas}, received(shared), "HAProxy spread the client over the replicas")
	assert.LessOrEqual(t, allowed, bound, "the client got more than its limit")
	assert.GreaterOrEqual(t, allowed, testLimit.Burst, "the client did not get its burst")
	for _, rp := range shared {
		assert.False(t, rp.store.(*Store).Stats().BreakerOpen)
		assert.Zero(t, rp.store.(*Store).Stats().Fallbacks, "decided by Redis")
	}

	allowed, _ = send(t, "127.0.0.22", lb[1], n)
	t.Logf("per-replica buckets: %d allowed; replicas received %v", allowed, received(local))
	assert.Equal(t, replicas*testLimit.Burst, allowed, "per-replica buckets give a client N times its limit (the case the store exists for)")
}

// TestRedisRestartAllowance: a client limited through three replicas loses
// no more than the documented allowance when redis-server is killed and
// started again: during the outage each replica's local fallback
// (Limit.Split(3)) lets through its own burst, and after the restart the
// client gets one extra Burst without persistence and nothing extra with
// an append-only file fsynced on every write.
func TestRedisRestartAllowance(t *testing.T) {
	for _, persist := range []bool{false, true} {
		t.Run(fmt.Sprintf("persist=%v", persist), func(t *testing.T) {
			r := e2e.StartRedis(t, e2e.RedisConfig{Persist: persist})
			fallback := testLimit.Split(replicas)
			rs := startReplicas(t, func(int) ratelimit.Store {
				return newStore(t, Config{
					Client: client(t, r.Addr()), Limit: testLimit, FallbackLimit: fallback,
					Timeout: time.Second, FailureThreshold: 1, Cooldown: time.Nanosecond,
				})
			})
			lb := startLB(t, rs)[0]
			const client, other, n = "127.0.0.31", "127.0.0.32", 30
			start := time.Now()

			before, _ := send(t, client, lb, n)
			assert.Equal(t, testLimit.Burst, before, "before the restart")

			r.Kill()
			during, _ := send(t, client, lb, n)
			outage := time.Since(start)
			duringBound := replicas * (fallback.Burst + refill(fallback, outage))
			assert.LessOrEqual(t, during, duringBound, "during the outage: each replica's fallback burst")
			for _, rp := range rs {
				assert.NotZero(t, rp.store.(*Store).Stats().Fallbacks)
			}

			r.Restart()
			// Each replica's next call probes Redis (Cooldown is a
			// nanosecond); another client's requests make those calls. A
			// go-redis pool that saw PoolSize dial errors dials again only
			// about a second later: the wait is bounded, not timed.
			deadline := time.Now().Add(15 * time.Second)
			for !allClosed(rs) && time.Now().Before(deadline) {
				send(t, other, lb, replicas)
				if !allClosed(rs) {
					<-time.After(50 * time.Millisecond)
				}
			}
			for _, rp := range rs {
				require.False(t, rp.store.(*Store).Stats().BreakerOpen, "a replica did not get back to Redis: %+v", rp.store.(*Store).Stats())
			}

			after, _ := send(t, client, lb, n)
			extra := testLimit.Burst // the bucket was lost: it is full again
			if persist {
				extra = 0 // nothing acknowledged was lost
			}
			refilled := refill(testLimit, time.Since(start))
			t.Logf("before %d, during the outage %d (bound %d), after the restart %d (allowance %d + refill %d)",
				before, during, duringBound, after, extra, refilled)
			assert.LessOrEqual(t, after, extra+refilled, "after the restart: more than the documented allowance")
			assert.GreaterOrEqual(t, after, extra, "after the restart")
			assert.LessOrEqual(t, before+during+after, testLimit.Burst+duringBound+extra+refilled)
		})
	}
}

func allClosed(rs []*replica) bool {
	for _, rp := range rs {
		if rp.store.(*Store).Stats().BreakerOpen {
			return false
		}
	}
	return true
}
