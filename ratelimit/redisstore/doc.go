// Package redisstore is a [ratelimit.Store] that keeps token buckets in
// Redis or Valkey, so that the replicas of a service behind a load
// balancer share one limit per client: a client spread over N replicas
// gets its limit, not N times it. It is a module of its own, so that the
// Redis client stays out of the sourceip library's dependencies.
//
// # Algorithm
//
// Each Take is one Lua script, run atomically by the server: GCRA (the
// generic cell rate algorithm), which keeps a token bucket as one number,
// the time at which the bucket is full again, in microseconds. The script
// reads the server's clock (TIME), not the replicas', so replicas whose
// clocks disagree still share one bucket exactly; it needs Redis 5 or
// later, or Valkey, for a script that writes after reading the clock. A
// key expires when its bucket is full again, so an idle client costs
// nothing. Keys are Config.Prefix followed by the ratelimit.Key's text
// ("sourceip:ratelimit:198.51.100.7/32"); with Redis Cluster each key is
// one slot, so any cluster works.
//
// # What a client can get
//
// While Redis answers, a key is allowed at most Burst + Rate × t events in
// any period t, across all replicas together (Rate rounded to whole
// microseconds per token).
//
// Losing Redis's data — a restart without persistence, a failover to a
// replica that had not received the last writes, a flush — can only make
// buckets fuller, and never fuller than full: it gives each key at most one
// extra Burst. With an append-only file fsynced on every write
// (appendfsync always) a restart loses nothing acknowledged and gives
// nothing extra; with appendfsync everysec it may lose the last second's
// writes, at most one Burst per key.
//
// While Redis is unreachable (calls fail or time out), Config.Failure
// decides, and Decision.Fallback says so:
//
//   - FailLocal (the default): local buckets of Config.FallbackLimit in each
//     replica. Over an outage of length d a key gets at most
//     FallbackLimit.Burst + FallbackLimit.Rate × d from each replica it
//     reaches — N times that across N replicas. With
//     FallbackLimit = Limit.Split(N) that is at most about Burst + Rate × d
//     in all. Redis does not learn of these events: they come on top of
//     what the key gets from Redis before and after the outage.
//   - FailOpen: every event is allowed; no limit during the outage.
//   - FailClosed: every event is refused with an error wrapping
//     ratelimit.ErrUnavailable (the HTTP middleware answers 503).
//
// A circuit breaker keeps an outage from adding a timeout to every event:
// after Config.FailureThreshold consecutive failed calls, events go to the
// fallback without calling Redis for Config.Cooldown; then one event
// probes Redis, and its success closes the breaker. An outage costs
// FailureThreshold calls' Timeout at its start and one call's Timeout per
// Cooldown after that.
//
// # Metrics
//
// [Store.Stats] returns counters (calls, allowed, refused, Redis errors,
// fallback decisions, breaker openings) and gauges (breaker open, the
// local fallback's buckets), for an exporter to publish.
package redisstore
