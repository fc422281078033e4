-- settle_cancelled.lua: a running task stopped because it was cancelled: its outcome.
-- KEYS[1] reserved zset   KEYS[2] cancelling hash (cancel.lua)
-- KEYS[3] failed list   KEYS[4] failed lookup (failed_list.lua)
-- KEYS[5] the task's result key   KEYS[6] its done list (a kept result reads cancelled)
-- KEYS[7] the queue's unique locks hash   KEYS[8] its event stream ("cancelled")
-- KEYS[9] its dependents set   KEYS[10] the queue's resolved list   KEYS[11] its timer
-- list: the tasks waiting for it (using(after=...)) are told (dependents.lua)
-- ARGV[1] reserved payload (exact bytes)   ARGV[2] its failed record (msgpack map built
-- by the worker, embedding ARGV[1]), filed only if asked   ARGV[3] the event stream's
-- cap; 0: no events   ARGV[4] '1' to file it in the failed list whatever the request
-- says   ARGV[5] the task's id (32 hex characters: its unique lock's owner)
-- Returns 1 if settled now (2 if filed in the failed list too), 0 if the task was no
-- longer reserved (settled already, or its reservation went to another worker).
-- Invariant: the task leaves the reserved set here and nowhere else is it put (never
-- retried); its request leaves the cancelling hash in the same step. The record is
-- filed before the task leaves reserved, as fail.lua does it.
-- @failed_list
-- @header
-- @events
-- @dependents
-- @cancelled
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local id = payload_id(ARGV[1])
local filed = ARGV[4] == '1'
if id then
  if redis.call('HGET', KEYS[2], id) == '1' then filed = true end
  redis.call('HDEL', KEYS[2], id)
end
if filed then
  reindex(KEYS[3], KEYS[4])
  redis.call('LPUSH', KEYS[3], ARGV[2])
  redis.call('ZADD', KEYS[4], next_sequence(KEYS[4]), free_member(KEYS[4], ARGV[2]))
end
redis.call('ZREM', KEYS[1], ARGV[1])
local record = mark_cancelled(KEYS[5], KEYS[6])
if record and id then notify_dependents(KEYS[9], KEYS[10], KEYS[11], id, record) end
drop_unique_lock(KEYS[7], ARGV[5])
local cap = tonumber(ARGV[3])
if cap > 0 then task_event(KEYS[8], cap, 'cancelled', ARGV[1]) end
if filed then return 2 end
return 1
