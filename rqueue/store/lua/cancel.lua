-- cancel.lua: cancel a task that was pushed and has not been reserved yet.
-- KEYS[1] pending-ids set   KEYS[2] cancelled set
-- ARGV[1] task id (32 hex characters)
-- Returns 1 if cancelled now, 2 if it was already cancelled, 0 if it is not pending
-- (reserved, finished, failed, never pushed, or re-queued after an attempt).
-- Invariant: O(1). The payload stays where it is (a list or the delayed zset) and
-- reserve.lua drops it instead of reserving it; cancel and reserve both remove the
-- id from pending-ids atomically, so exactly one of them wins: a cancelled task never
-- runs, and a task reserved first is reported as not pending.
if redis.call('SREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('SADD', KEYS[2], ARGV[1])
  return 1
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 2 end
return 0
