-- fail.lua: move a reserved task to the failed list with the record of its failure.
-- KEYS[1] reserved zset   KEYS[2] failed list
-- ARGV[1] reserved payload (exact bytes)   ARGV[2] failed record (msgpack, built by
-- the worker, embedding ARGV[1] unchanged)   ARGV[3] '1' to record it even if it is
-- no longer reserved (bytes that are not a task: nobody else can own them)
-- Returns 1 if recorded, 0 if the task was no longer this worker's.
-- Invariant: a task is in reserved or in failed, never both and never neither.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 or ARGV[3] == '1' then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  return 1
end
return 0
