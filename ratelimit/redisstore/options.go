package redisstore

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// Options returns go-redis options for a client that serves a [Store] at
// addr: each call bounded by its context (ContextTimeoutEnabled, so that
// Config.Timeout holds), no command retries, one dial attempt with a short
// timeout. The Store answers failures itself (its fallback and circuit
// breaker); retries would only make an outage slower for every request.
// Adjust the result (Password, TLSConfig, PoolSize, …) before
// redis.NewClient. Note that after as many dial errors as PoolSize the
// client itself waits about a second before dialing again, so a store
// returns to Redis about a second after Redis is back.
func Options(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           250 * time.Millisecond,
	}
}
