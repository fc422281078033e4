-- cancel.lua: cancel a task by its id: at once if it is pending (pushed, not reserved
-- yet), or by a request to its worker if it is running.
-- KEYS[1] pending-ids set   KEYS[2] cancelled set
-- KEYS[3] the task's result key   KEYS[4] its done list: if the task keeps its result
-- (its status record exists), it is marked cancelled and whoever waits for it wakes
-- KEYS[5] the queue's unique locks hash: a cancelled task releases the lock it holds (as
-- release_unique.lua does, here so that no dispatch is deduplicated against a task
-- already cancelled)
-- KEYS[6] the queue's events marker   KEYS[7] its event stream: a "cancelled" event
-- while a worker records events (see push.lua and events.lua)
-- KEYS[8] the queue's reserved zset (the tasks in flight)   KEYS[9] its cancelling hash:
-- raw task id -> '1' (file it in the failed list too) or '0'
-- KEYS[10] its timer list: a token there wakes a worker parent waiting on it (supervisor.py
-- blocks on it between ticks), so the request is seen at once, not at its next poll
-- KEYS[11] the task's dependents set   KEYS[12] the queue's resolved list: the tasks
-- waiting for it (using(after=...)) are told it was cancelled (dependents.lua)
-- ARGV[1] task id (32 hex characters)   ARGV[2] the same id as stored in the sets: its
-- 16 raw bytes   ARGV[3] '1' to file the task in the failed list once it stops
-- Returns 1 if cancelled now, 2 if it was already cancelled, 3 if it is running and its
-- cancel was requested (again: the request stands, its flag replaced), 0 if it is
-- neither pending nor running (finished, failed, or never pushed).
-- Invariant: a pending task costs O(1): the payload stays where it is (a list or the
-- delayed zset) and reserve.lua drops it instead of reserving it; cancel and reserve
-- both remove the id from pending-ids atomically, so exactly one of them wins. A task
-- not pending costs a read of the reserved set; if it is there, the request waits in
-- the cancelling hash for the worker's parent, which signals the child running it
-- (supervisor.py), and the task's settle (settle_cancelled.lua, or release.lua refusing
-- it a retry) clears it; a request for a task that finished meanwhile is pruned
-- (prune_cancelling.lua).
-- @header
-- @events
-- @dependents
-- @cancelled
if redis.call('SREM', KEYS[1], ARGV[2]) == 1 then
  redis.call('SADD', KEYS[2], ARGV[2])
  local cap = marked_cap(KEYS[6])
  if cap then add_event(KEYS[7], cap, {'event', 'cancelled', 'id', ARGV[2], 'task', '', 'attempt', 0}) end
  local record = mark_cancelled(KEYS[3], KEYS[4])
  if record then notify_dependents(KEYS[11], KEYS[12], KEYS[10], ARGV[2], record) end
  drop_unique_lock(KEYS[5], ARGV[1])
  return 1
end
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 or redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return 2
end
for _, payload in ipairs(redis.call('ZRANGE', KEYS[8], 0, -1)) do
  if payload_id(payload) == ARGV[2] then
    redis.call('HSET', KEYS[9], ARGV[2], ARGV[3])
    if redis.call('LLEN', KEYS[10]) == 0 then redis.call('RPUSH', KEYS[10], 0) end
    return 3
  end
end
return 0
