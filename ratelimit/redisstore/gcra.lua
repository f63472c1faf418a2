-- GCRA (the generic cell rate algorithm: a token bucket kept as one
-- number) for one bucket, atomically, on the server's clock.
--
-- KEYS[1]  the bucket
-- ARGV[1]  T: microseconds per token (the emission interval), an integer >= 1
-- ARGV[2]  the burst, in tokens
-- ARGV[3]  n: the tokens asked for
-- ARGV[4]  the longest wait the caller accepts, in microseconds
--
-- The key holds the theoretical arrival time (TAT) in microseconds: the
-- time at which the bucket is full again. A missing key is a full bucket.
-- The bucket holds (now + burst*T - TAT) / T tokens. Taking n moves TAT on
-- by n*T; that is allowed when the bucket then holds at least -maxwait/T
-- tokens, i.e. when the caller waits at most maxwait. The key expires when
-- the bucket is full again, so idle clients cost nothing.
--
-- Returns {allowed (0 or 1), wait (µs: the delay if allowed, the time
-- until the tokens are there if refused), level (µs: tokens*T after the
-- decision, negative in debt)}.
local T = tonumber(ARGV[1])
local tau = T * tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local maxwait = tonumber(ARGV[4])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
local new = tat + n * T
local wait = new - tau - now
if wait > maxwait then
  return {0, wait, now + tau - tat}
end
if wait < 0 then
  wait = 0
end
if new > now then
  redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.ceil((new - now) / 1000))
end
return {1, wait, now + tau - new}
