-- retry_failed.lua: put a failed task back on its queue with its attempts reset.
-- KEYS[1] failed list   KEYS[2] ready list   KEYS[3] notify list
-- ARGV[1] the failed record (exact bytes)   ARGV[2] the payload to push, attempts 0
-- Returns 1 if the record was still there and the task was pushed, else 0.
-- Invariant: a retried task leaves the failed list and enters the ready list together,
-- and two concurrent retries of one record push it once.
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  if redis.call('LLEN', KEYS[3]) == 0 then redis.call('RPUSH', KEYS[3], 1) end
  return 1
end
return 0
