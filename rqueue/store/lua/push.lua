-- push.lua: add tasks to a queue, ready now or after a delay.
-- KEYS[1] ready list   KEYS[2] delayed zset   KEYS[3] notify list   KEYS[4] timer list
-- KEYS[5] pending-ids set (the payloads' ids are added, one SADD per call: O(1) per
--         payload, so that cancel.lua can cancel a task by id without a scan)
-- KEYS[6..] (optional) the result keys of the payloads that keep their result: each
--         gets a status record saying the task is pending or delayed (and when it is
--         due), so a caller can tell "queued" from "never heard of" (results.py)
-- ARGV[1] delay in milliseconds (0 or less: ready now)
-- ARGV[2] how long those status records last, in milliseconds
-- ARGV[3..] payloads
-- Returns the length of the list or set the payloads went into.
-- Invariant: each payload is in exactly one of ready or delayed; an idle worker blocked
-- on notify wakes for ready tasks, and a parent blocked on timer wakes when the
-- earliest due time moves earlier. Due times come from Redis TIME, the one clock.
local delay = tonumber(ARGV[1])
local ids = {}
for i = 3, #ARGV do
  if string.sub(ARGV[i], 37, 38) == '\217\32' then ids[#ids + 1] = string.sub(ARGV[i], 39, 70) end
end
if #ids > 0 then redis.call('SADD', KEYS[5], unpack(ids)) end
if #KEYS > 5 then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local state = 'pending'
  if delay > 0 then state = 'delayed' end
  local record = cmsgpack.pack({state = state, due = now + math.max(delay, 0)})
  for i = 6, #KEYS do redis.call('SET', KEYS[i], record, 'PX', ARGV[2]) end
end
if delay <= 0 then
  local length = redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
  if redis.call('LLEN', KEYS[3]) == 0 then redis.call('RPUSH', KEYS[3], 1) end
  return length
end
local time = redis.call('TIME')
local due = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + delay
local earliest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
for i = 3, #ARGV do
  redis.call('ZADD', KEYS[2], due, ARGV[i])
end
if earliest[2] == nil or due < tonumber(earliest[2]) then
  redis.call('DEL', KEYS[4])
  redis.call('RPUSH', KEYS[4], due)
end
return redis.call('ZCARD', KEYS[2])
