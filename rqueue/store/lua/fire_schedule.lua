-- fire_schedule.lua: enqueue a schedule's due triggers and move it to its next fire time.
-- KEYS[1] schedules zset (name -> next fire ms)   KEYS[2] schedule-defs hash
-- KEYS[3] ready list   KEYS[4] notify list   KEYS[5] pending-ids set
-- ARGV[1] schedule name
-- ARGV[2] the score this worker read (the trigger it is firing from)
-- ARGV[3] the definition bytes this worker read
-- ARGV[4] the next fire time in ms, or -1 if the schedule is finished (or shelved:
--         a definition that cannot fire leaves the timeline, ARGV[5] = ARGV[3])
-- ARGV[5] the new definition bytes (last run, finished flag)
-- ARGV[6..] payloads to push, one per trigger (ids derived from name and trigger)
-- Returns 1 if this call fired, 0 if another worker (or a change) got there first.
-- Invariant: compare-and-set on both the score and the definition, so each trigger
-- is enqueued by exactly one worker, and a schedule updated, paused or removed after
-- this worker read it is never fired with the old definition. Python computed every
-- time; Lua only compares and writes.
-- @header
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[3] then return 0 end
if #ARGV >= 6 then
  redis.call('RPUSH', KEYS[3], unpack(ARGV, 6))
  local ids = {}
  for i = 6, #ARGV do ids[#ids + 1] = payload_id(ARGV[i]) end
  if #ids > 0 then redis.call('SADD', KEYS[5], unpack(ids)) end
  if redis.call('LLEN', KEYS[4]) == 0 then redis.call('RPUSH', KEYS[4], 1) end
end
if tonumber(ARGV[4]) < 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[5])
return 1
