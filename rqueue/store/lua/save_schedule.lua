-- save_schedule.lua: create, update, pause or resume a schedule.
-- KEYS[1] schedules zset   KEYS[2] schedule-defs hash   KEYS[3] timer list
-- ARGV[1] schedule name
-- ARGV[2] the definition bytes the caller read ('' if it must not exist yet)
-- ARGV[3] the new definition bytes
-- ARGV[4] next fire time in ms, or -1 to take it off the timeline (paused, finished)
-- Returns 1 if saved, 0 if the definition changed since the caller read it.
-- Invariant: the definition and its place on the timeline change together, never a
-- lost update (compare-and-set), and a parent blocked on the timer list wakes at once
-- so the change takes effect at its next tick.
local current = redis.call('HGET', KEYS[2], ARGV[1])
if (current or '') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
if tonumber(ARGV[4]) < 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
end
redis.call('DEL', KEYS[3])
redis.call('RPUSH', KEYS[3], ARGV[4])
return 1
