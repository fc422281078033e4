-- renew.lua: extend the reservation of a task its worker is about to start; that
-- confirms an unconfirmed one (reserve.lua's ARGV[9]): its score is whole again.
-- KEYS[1] reserved zset
-- ARGV[1] reserved payload (the exact bytes reserve.lua returned)
-- ARGV[2] milliseconds from now the reservation must last (margin + timeout + grace)
-- Returns 1 if renewed; 0 if the task is no longer reserved: its reservation ran out
-- and it went back to the queue, so the caller must not run it.
-- Invariant: only a live reservation is extended; an expired one is never revived.
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  return 1
end
return 0
