-- fail.lua: move a reserved task to the failed list with the record of its failure.
-- KEYS[1] reserved zset   KEYS[2] failed list
-- KEYS[3], KEYS[4] (optional) the task's result key and done list, if it keeps its
-- result: the failure is written there in the same step (see ack.lua)
-- ARGV[1] reserved payload (exact bytes)   ARGV[2] failed record (msgpack, built by
-- the worker, embedding ARGV[1] unchanged)   ARGV[3] '1' to record it even if it is
-- no longer reserved (bytes that are not a task: nobody else can own them)
-- ARGV[4] the result record   ARGV[5] milliseconds to keep it (with KEYS[3] only)
-- Returns 1 if recorded, 0 if the task was no longer this worker's.
-- Invariant: a task is in reserved or in failed, never both and never neither.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 or ARGV[3] == '1' then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  if KEYS[3] then
    redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5])
    redis.call('DEL', KEYS[4])
    redis.call('RPUSH', KEYS[4], 1)
    redis.call('PEXPIRE', KEYS[4], ARGV[5])
  end
  return 1
end
return 0
