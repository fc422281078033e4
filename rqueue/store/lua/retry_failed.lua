-- retry_failed.lua: put a failed task back on its queue with its attempts reset.
-- KEYS[1] failed list   KEYS[2] ready list   KEYS[3] notify list
-- KEYS[4] pending-ids set: the task is pending again, so it can be cancelled
-- KEYS[5] its result key: if it keeps its result, the record of its failure is
--         replaced by a status record saying it is pending (push.lua's), kept as long
--         as the failure was
-- ARGV[1] the failed record (exact bytes)   ARGV[2] the payload to push, attempts 0
-- Returns 1 if the record was still there and the task was pushed, else 0.
-- Invariant: a retried task leaves the failed list and enters the ready list together,
-- and two concurrent retries of one record push it once.
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  if redis.call('LLEN', KEYS[3]) == 0 then redis.call('RPUSH', KEYS[3], 1) end
  if #ARGV[2] > 70 and string.sub(ARGV[2], 37, 38) == '\217\32' then
    redis.call('SADD', KEYS[4], string.sub(ARGV[2], 39, 70))
    local ttl = redis.call('PTTL', KEYS[5])
    if ttl > 0 then
      local time = redis.call('TIME')
      local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
      redis.call('SET', KEYS[5], cmsgpack.pack({state = 'pending', due = now}), 'PX', ttl)
    end
  end
  return 1
end
return 0
