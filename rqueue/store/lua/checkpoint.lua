-- checkpoint.lua: keep, or forget, how far an iterable task has come (its cursor).
-- KEYS[1] the task's checkpoint key (a string: msgpack [cursor, items done, total])
-- KEYS[2] the queue's reserved zset
-- ARGV[1] the checkpoint's bytes, or '' to forget it (the task finished for good)
-- ARGV[2] milliseconds the checkpoint lasts from now (it expires: a task that never
--         runs again leaves nothing behind)
-- ARGV[3] the task's reserved payload (the exact bytes reserve.lua returned): only the
--         worker still holding the task may move its checkpoint; '' when forgetting
-- ARGV[4] milliseconds from now its reservation lasts once renewed (margin + timeout +
--         grace), so a task checkpointing for hours is never taken for a lost one;
--         0: the reservation is left as it is
-- Returns 1 if done; 0 if the payload is no longer reserved (its reservation ran out,
-- or the task was settled, and it may run elsewhere now): nothing written, the caller
-- must stop running it.
-- Invariant: a checkpoint moves only while its writer holds the task, and an expired
-- reservation is never revived (as renew.lua).
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1])
  return 1
end
if not redis.call('ZSCORE', KEYS[2], ARGV[3]) then
  return 0
end
local lasting = tonumber(ARGV[4])
if lasting > 0 then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('ZADD', KEYS[2], now + lasting, ARGV[3])
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
