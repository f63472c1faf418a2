package redisstore

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/sourceip/sourceip/internal/e2e"
	"github.com/sourceip/sourceip/ratelimit"
)

// BenchmarkRedis: Take on a key Redis holds (one EVALSHA of the GCRA
// script), beside a PING on the same client, which is the round trip alone:
// the difference is what the script and the store add. Serial and from
// every core; against a redis-server on loopback.
func BenchmarkRedis(b *testing.B) {
	r := e2e.StartRedis(b, e2e.RedisConfig{})
	c := client(b, r.Addr())
	s := newStore(b, Config{Client: c, Limit: ratelimit.Limit{Rate: 1e6, Burst: 1000}})
	now := time.Now()
	if _, err := s.Take(ctx, alice, now, 1, 0); err != nil {
		b.Fatal(err)
	}
	keys := make([]ratelimit.Key, 64)
	for i := range keys {
		keys[i] = ratelimit.Key{Prefix: netip.MustParsePrefix("198.51.100.0/32"), Identity: strconv.Itoa(i)}
	}
	b.Run("ping", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("take", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if d, err := s.Take(ctx, alice, now, 1, 0); err != nil || d.Fallback {
				b.Fatal(err, d)
			}
		}
	})
	b.Run("ping/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := c.Ping(ctx).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("take/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				if d, err := s.Take(ctx, keys[i%len(keys)], now, 1, 0); err != nil || d.Fallback {
					b.Fatal(err, d)
				}
			}
		})
	})
}

// BenchmarkFallback: Take while the breaker is open — what an event costs
// during an outage (the local buckets, no call).
func BenchmarkFallback(b *testing.B) {
	r := e2e.StartRedis(b, e2e.RedisConfig{})
	s := newStore(b, Config{Client: client(b, r.Addr()), Limit: ratelimit.Limit{Rate: 1e6, Burst: 1000}, FailureThreshold: 1, Cooldown: time.Hour})
	r.Kill()
	now := time.Now()
	s.Take(ctx, alice, now, 1, 0)
	b.ReportAllocs()
	for b.Loop() {
		if d, _ := s.Take(ctx, alice, now, 1, 0); !d.Fallback {
			b.Fatal("not a fallback decision")
		}
	}
}
