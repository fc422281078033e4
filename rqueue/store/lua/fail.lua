-- fail.lua: move a reserved task to its queue's failed list with the record of its failure.
-- KEYS[1] reserved zset   KEYS[2] failed list   KEYS[3] failed lookup (failed_list.lua)
-- KEYS[4] the queue's event stream: a "failed" event, with the record's error type,
--         when ARGV[4] is not 0 (see events.lua)
-- KEYS[5] the queue's cancelling hash (cancel.lua): a cancel requested for the task is
-- forgotten, its failure being its outcome
-- KEYS[6..11] (optional) the task's result key, its done list, the queue's finished
-- index, its dependents set, the queue's resolved and timer lists, if it keeps its
-- result: the failure is written there in the same step (see ack.lua, keep_result.lua)
-- ARGV[1] reserved payload (exact bytes)   ARGV[2] failed record (msgpack map, built by
-- the worker, embedding ARGV[1] unchanged)   ARGV[3] '1' to record it even if it is
-- no longer reserved (bytes that are not a task: nobody else can own them)
-- ARGV[4] the event stream's cap; 0: no events
-- ARGV[5] the result record   ARGV[6] milliseconds to keep it (with KEYS[6] only)
-- Returns 1 if recorded, 0 if the task was no longer this worker's.
-- Invariant: a task is in reserved or in failed, never both and never neither. The
-- record goes to the head of the list and its member "<id>#<n>" (n the first free) into
-- the lookup with the next sequence number, so the two stay in step (failed_list.lua);
-- a second record of one id (failed again after a retry) is kept beside the first.
-- The record is filed before the task leaves reserved: a write Redis refuses (a key of
-- the wrong type) stops the script with the task still reserved, never in neither.
-- @failed_list
-- @header
-- @dependents
-- @keep_result
-- @events
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or ARGV[3] == '1' then
  reindex(KEYS[2], KEYS[3])
  redis.call('LPUSH', KEYS[2], ARGV[2])
  redis.call('ZADD', KEYS[3], next_sequence(KEYS[3]), free_member(KEYS[3], ARGV[2]))
  redis.call('ZREM', KEYS[1], ARGV[1])
  local id = payload_id(ARGV[1])
  if id then redis.call('HDEL', KEYS[5], id) end
  if KEYS[6] then keep_result(6, ARGV[5], ARGV[6], ARGV[1]) end
  local cap = tonumber(ARGV[4])
  if cap > 0 then task_event(KEYS[4], cap, 'failed', ARGV[1], 'error', record_error(ARGV[2])) end
  return 1
end
return 0
