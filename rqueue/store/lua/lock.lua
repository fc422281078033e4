-- lock.lua: take a lock for a run (WithoutOverlapping), or say how long it is held.
-- KEYS[1] the lock   ARGV[1] the run's token (task id and attempt)   ARGV[2] ms it lasts
-- Returns 0 if this run holds it now, else milliseconds its holder keeps it at most.
-- Invariant: a lock always expires, so a holder killed with SIGKILL frees it in time.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 0
end
return math.max(redis.call('PTTL', KEYS[1]), 1)
