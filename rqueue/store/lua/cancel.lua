-- cancel.lua: cancel a task that was pushed and has not been reserved yet.
-- KEYS[1] pending-ids set   KEYS[2] cancelled set
-- KEYS[3] the task's result key   KEYS[4] its done list: if the task keeps its result
-- (its status record exists), it is marked cancelled and whoever waits for it wakes
-- KEYS[5] the queue's unique locks hash: a cancelled task releases the lock it holds (as
-- release_unique.lua does, here so that no dispatch is deduplicated against a task
-- already cancelled)
-- KEYS[6] the queue's events marker   KEYS[7] its event stream: a "cancelled" event
-- while a worker records events (see push.lua and events.lua)
-- ARGV[1] task id (32 hex characters)   ARGV[2] the same id as stored in the sets: its
-- 16 raw bytes
-- Returns 1 if cancelled now, 2 if it was already cancelled, 0 if it is not pending
-- (reserved, finished, failed, or never pushed).
-- Invariant: O(1). The payload stays where it is (a list or the delayed zset) and
-- reserve.lua drops it instead of reserving it; cancel and reserve both remove the
-- id from pending-ids atomically, so exactly one of them wins: a cancelled task never
-- runs, and a task reserved first is reported as not pending.
-- @header
-- @events
if redis.call('SREM', KEYS[1], ARGV[2]) == 1 then
  redis.call('SADD', KEYS[2], ARGV[2])
  local cap = marked_cap(KEYS[6])
  if cap then add_event(KEYS[7], cap, {'event', 'cancelled', 'id', ARGV[2], 'task', '', 'attempt', 0}) end
  local ttl = redis.call('PTTL', KEYS[3])
  if ttl > 0 then
    redis.call('SET', KEYS[3], cmsgpack.pack({state = 'cancelled'}), 'PX', ttl)
    redis.call('DEL', KEYS[4])
    redis.call('RPUSH', KEYS[4], 1)
    redis.call('PEXPIRE', KEYS[4], ttl)
  end
  local key = redis.call('TYPE', KEYS[5])['ok'] == 'hash' and redis.call('HGET', KEYS[5], 'id:' .. ARGV[1])
  if key then
    redis.call('HDEL', KEYS[5], 'id:' .. ARGV[1])
    local held = redis.call('HGET', KEYS[5], 'key:' .. key)
    if held and string.sub(held, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then redis.call('HDEL', KEYS[5], 'key:' .. key) end
  end
  return 1
end
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 or redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return 2
end
return 0
