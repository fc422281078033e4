-- release_unique.lua: release the unique lock a task holds (``@task(unique=)``).
-- KEYS[1] the queue's unique locks hash (see push.lua)
-- ARGV[1] the task's id
-- Returns 1 if it held a lock and released it, else 0.
-- Invariant: only the lock's owner releases it: a task whose lock expired and was taken
-- by another dispatch (or that never took one: a retry from the failed list, a
-- workflow's step) leaves the new owner's lock alone. A key of another type: WRONGTYPE.
local key = redis.call('HGET', KEYS[1], 'id:' .. ARGV[1])
if not key then return 0 end
redis.call('HDEL', KEYS[1], 'id:' .. ARGV[1])
local held = redis.call('HGET', KEYS[1], 'key:' .. key)
if held and string.sub(held, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
  redis.call('HDEL', KEYS[1], 'key:' .. key)
  return 1
end
return 0
