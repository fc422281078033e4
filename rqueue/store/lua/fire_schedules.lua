-- fire_schedules.lua: enqueue the due triggers of schedules of one queue and move each
-- to its next fire time.
-- KEYS[1] schedules zset (name -> next fire ms)   KEYS[2] schedule-defs hash
-- KEYS[3] ready list   KEYS[4] notify list   KEYS[5] pending-ids set
-- ARGV[1] the schedules, one msgpack array (one argument to parse, not six a schedule:
--   that cost the caller more than the rest of a firing), each an array of: its name;
--   the score this worker read (the trigger it fires from); the definition bytes it
--   read; the next fire time in ms, or -1 if the schedule is finished (or shelved: a
--   definition that cannot fire leaves the timeline, its new definition = the one
--   read); the new definition bytes (last run, finished flag); the payloads to push,
--   an array, one per trigger (ids derived from name and trigger).
-- Returns the places (1 for the first group) of the schedules this call did not fire,
-- because another worker (or a change) got there first: usually none, a short reply
-- (one number per schedule cost the caller more to read than the rest of the reply).
-- Invariant: compare-and-set on both the score and the definition of each schedule,
-- so each trigger is enqueued by exactly one worker, and a schedule updated, paused or
-- removed after this worker read it is never fired with the old definition. Python
-- computed every time; Lua only compares and writes. One call carries what one tick
-- read of one queue (at most scheduler.BATCH schedules): a bounded call.
-- @header
local lost, pushed = {}, false
for place, schedule in ipairs(cmsgpack.unpack(ARGV[1])) do
  local name, read_ms, read, next_ms, definition, payloads = unpack(schedule)
  local score = redis.call('ZSCORE', KEYS[1], name)
  if score and tonumber(score) == read_ms and redis.call('HGET', KEYS[2], name) == read then
    if #payloads > 0 then
      redis.call('RPUSH', KEYS[3], unpack(payloads))
      local ids = {}
      for _, payload in ipairs(payloads) do ids[#ids + 1] = payload_id(payload) end
      if #ids > 0 then redis.call('SADD', KEYS[5], unpack(ids)) end
      pushed = true
    end
    if next_ms < 0 then
      redis.call('ZREM', KEYS[1], name)
    else
      redis.call('ZADD', KEYS[1], next_ms, name)
    end
    redis.call('HSET', KEYS[2], name, definition)
  else
    lost[#lost + 1] = place
  end
end
if pushed and redis.call('LLEN', KEYS[4]) == 0 then redis.call('RPUSH', KEYS[4], 1) end
return lost
