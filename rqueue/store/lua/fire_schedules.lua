-- fire_schedules.lua: enqueue the due triggers of schedules of one queue and move each
-- to its next fire time.
-- KEYS[1] schedules zset (name -> next fire ms)   KEYS[2] schedule-defs hash
-- KEYS[3] ready list   KEYS[4] notify list   KEYS[5] pending-ids set
-- KEYS[6..19] the queue's priority levels (levels.lua): each run goes to its task's
--   level, read from its payload (a schedule fires seldom: read every time)
-- ARGV[1] the schedules, one msgpack array (one argument to parse, not seven a
--   schedule: that cost the caller more than the rest of a firing), each an array of:
--   its name; the score this worker read (the trigger it fires from); the definition
--   bytes it read; the next fire time in ms, or -1 if the schedule is finished (or
--   shelved: a definition that cannot fire leaves the timeline, its new definition =
--   the one read); the new definition bytes (last run, finished flag); the payloads
--   to push, an array, one per trigger (ids derived from name and trigger); the last
--   time in ms this firing holds for (a firing planned ahead of its trigger: past it,
--   the trigger is late and the misfire policy decides), or -1 for no limit.
-- Returns {lost, early, now}: the places (1 for the first) of the schedules this call
-- did not fire because another worker (or a change) got there first, or because the
-- firing no longer holds (usually none: a short reply); those it did not fire because
-- their trigger is still ahead by this node's clock; and that clock in ms.
-- Invariant: compare-and-set on both the score and the definition of each schedule,
-- so each trigger is enqueued by exactly one worker, and a schedule updated, paused or
-- removed after this worker read it is never fired with the old definition. Nothing
-- fires before its trigger by Redis's TIME, whatever the worker's clock says (it may
-- have planned the firing ahead). Python computed every time; Lua only compares and
-- writes. One call carries at most schedule_store.FIRE_CHUNK schedules: a bounded call.
-- @header
-- @levels
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local lost, early, pushed = {}, {}, false
for place, schedule in ipairs(cmsgpack.unpack(ARGV[1])) do
  local name, read_ms, read, next_ms, definition, payloads, fire_by = unpack(schedule)
  if now < read_ms then
    early[#early + 1] = place
  else
    local score = redis.call('ZSCORE', KEYS[1], name)
    if (fire_by < 0 or now <= fire_by) and score and tonumber(score) == read_ms
        and redis.call('HGET', KEYS[2], name) == read then
      if #payloads > 0 then
        local ids, by_level = {}, {}
        for _, payload in ipairs(payloads) do
          local level, group = payload_level(payload, true)
          if group then
            to_level(6, level, payload, false, group)
            redis.call('SET', KEYS[17], 1)
          else
            by_level[level] = by_level[level] or {}
            table.insert(by_level[level], payload)
          end
          ids[#ids + 1] = payload_id(payload)
        end
        for level, pushes in pairs(by_level) do  -- one RPUSH a level, as one before levels
          redis.call('RPUSH', KEYS[6 + level], unpack(pushes))
          if level ~= PLAIN_LEVEL then
            redis.call('SADD', KEYS[16], level)
            redis.call('SET', KEYS[17], 1)
          end
        end
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
end
if pushed and redis.call('LLEN', KEYS[4]) == 0 then redis.call('RPUSH', KEYS[4], 1) end
return {lost, early, now}
