-- fail.lua: move a reserved task to the failed records with the record of its failure.
-- KEYS[1] reserved zset   KEYS[2] failed index (zset: record key -> when it came, in
-- microseconds of Redis's clock, and always after the newest before it)
-- KEYS[3] failed records (hash: record key -> record bytes)
-- KEYS[4], KEYS[5] (optional) the task's result key and done list, if it keeps its
-- result: the failure is written there in the same step (see ack.lua)
-- ARGV[1] reserved payload (exact bytes)   ARGV[2] failed record (msgpack map, built by
-- the worker, embedding ARGV[1] unchanged)   ARGV[3] '1' to record it even if it is
-- no longer reserved (bytes that are not a task: nobody else can own them)
-- ARGV[4] the result record   ARGV[5] milliseconds to keep it (with KEYS[4] only)
-- Returns 1 if recorded, 0 if the task was no longer this worker's.
-- Invariant: a task is in reserved or in failed, never both and never neither. A record
-- is filed under "<its id>#<n>", n the first free of 1, 2, ...: one task's records fill
-- n = 1 to m with no gap (retry_failed.lua keeps it so), and a second record of one id
-- (failed again after a retry, or written twice) is kept beside the first, never over it.
-- The scores rise strictly in the order records come, as a list's order did.
-- record_id(record): the id a record (failed.make_record's) opens with: a msgpack map
-- (0x80 to 0x8f) whose first key is "id" (0xa2 'id') and whose value is a string (fixstr,
-- or str 8: 0xd9 and its length); else nil. Read from the head because Redis's cmsgpack
-- cannot decode the record (its payload is msgpack bin, which cmsgpack does not know).
local function record_id(record)
  local map, marker, length = string.byte(record, 1), string.byte(record, 5, 6)
  if not map or map < 0x80 or map > 0x8f or string.sub(record, 2, 4) ~= '\162id' then
    return nil
  elseif marker and marker >= 0xa0 and marker <= 0xbf then
    return string.sub(record, 6, 5 + marker - 0xa0)
  elseif marker == 0xd9 and length and #record >= 6 + length then
    return string.sub(record, 7, 6 + length)
  end
  return nil
end

if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 or ARGV[3] == '1' then
  local id = record_id(ARGV[2]) or ('?' .. redis.sha1hex(ARGV[2]))
  local n = 1
  while redis.call('HSETNX', KEYS[3], id .. '#' .. n, ARGV[2]) == 0 do n = n + 1 end
  local time = redis.call('TIME')
  local score = tonumber(time[1]) * 1000000 + tonumber(time[2])
  local newest = redis.call('ZREVRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]
  if newest and tonumber(newest) >= score then score = tonumber(newest) + 1 end
  redis.call('ZADD', KEYS[2], string.format('%.0f', score), id .. '#' .. n)
  if KEYS[4] then
    redis.call('SET', KEYS[4], ARGV[4], 'PX', ARGV[5])
    redis.call('DEL', KEYS[5])
    redis.call('RPUSH', KEYS[5], 1)
    redis.call('PEXPIRE', KEYS[5], ARGV[5])
  end
  return 1
end
return 0
