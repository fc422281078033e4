-- rate_limit.lua: may one more run of a rate-limited task start now? (RateLimited)
-- A GCRA (generic cell rate algorithm) with no burst: runs are cells `interval` =
-- period / limit apart, so no window of `period` ms holds more than `limit` of them (a
-- burst would let up to twice as many into one window). A task that may not start now
-- is given the next free cell, which is taken for it at once, and waits for it in the
-- delayed set: when it comes back it runs, so a backlog is paced in one release per
-- task instead of each one knocking again and again.
-- KEYS[1] the limiter's theoretical arrival time (ms): when the next cell frees
-- KEYS[2] zset: ids of tasks holding a cell -> the cell's time (ms)
-- ARGV[1] the task's id   ARGV[2] interval in ms
-- Returns 0 if it may start now, else milliseconds until its cell.
-- Invariant: in any window of `period` ms, at most `limit` cells are handed out.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000  -- ms, to the microsecond
local interval = tonumber(ARGV[2])
local held = redis.call('ZSCORE', KEYS[2], ARGV[1])
if held then
  held = tonumber(held)
  if held > now then return math.ceil(held - now) end  -- back early: wait the rest
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
local tat = tonumber(redis.call('GET', KEYS[1])) or now  -- missing or garbage: no debt
if tat < now then tat = now end
local allowed_at = tat
redis.call('SET', KEYS[1], tat + interval, 'PX', math.ceil(tat + interval - now) + 1000)
if allowed_at <= now then return 0 end
-- Cells whose task never came back (cancelled, or its worker lost) are forgotten an
-- hour after their time; the zset itself goes an hour after its last cell.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 3600000)
redis.call('ZADD', KEYS[2], allowed_at, ARGV[1])
redis.call('PEXPIRE', KEYS[2], math.ceil(allowed_at - now) + 3600000)
return math.ceil(allowed_at - now)
