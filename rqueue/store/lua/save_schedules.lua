-- save_schedules.lua: create, update, pause or resume schedules of one queue.
-- KEYS[1] schedules zset   KEYS[2] schedule-defs hash   KEYS[3] timer list
-- ARGV[1] to ARGV[4] the first schedule: its name; the definition bytes the caller read
--   ('' if it must not exist yet); the new definition bytes; the next fire time in ms,
--   or -1 to take it off the timeline (paused, finished). ARGV[5] to ARGV[8] the next
--   schedule, and so on.
-- Returns one 1 (saved) or 0 (its definition changed since the caller read it) per
-- schedule, in order.
-- Invariant: each schedule's definition and its place on the timeline change together,
-- never a lost update (compare-and-set), and a parent blocked on the timer list wakes
-- at once so the changes take effect at its next tick. A bulk add sends at most
-- schedule_store.SAVE_CHUNK schedules a call: a bounded call.
local saved, any = {}, false
for i = 1, #ARGV, 4 do
  local name, next_ms = ARGV[i], ARGV[i + 3]
  if (redis.call('HGET', KEYS[2], name) or '') == ARGV[i + 1] then
    redis.call('HSET', KEYS[2], name, ARGV[i + 2])
    if tonumber(next_ms) < 0 then
      redis.call('ZREM', KEYS[1], name)
    else
      redis.call('ZADD', KEYS[1], next_ms, name)
    end
    saved[#saved + 1] = 1
    any = true
  else
    saved[#saved + 1] = 0
  end
end
if any then
  redis.call('DEL', KEYS[3])
  redis.call('RPUSH', KEYS[3], 1)
end
return saved
