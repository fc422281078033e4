-- convert_failed.lua: move the oldest records of a queue's failed list (written by a
-- version before the failed index) into the index and the records hash, a chunk a call.
-- KEYS[1] the old failed list   KEYS[2] failed index (zset)   KEYS[3] failed records (hash)
-- ARGV[3i - 2] the i-th record of the list from its head (exact bytes), ARGV[3i - 1] its
-- id ('' if it does not decode: it is filed under '?' and its SHA-1), ARGV[3i] its score
-- (when it failed, µs, rising in the list's order), as the caller read and decoded them.
-- Returns how many were moved, or -1 if the list's head is no longer those records
-- (another converter moved them first): read it again.
-- Invariant: each record is in the list or in the index, never both and never neither,
-- filed as fail.lua files it (under "<id>#<n>", n the first free); concurrent converters
-- never move a record twice. O(records given) a call.
local count = #ARGV / 3
if count == 0 then return 0 end
if redis.call('TYPE', KEYS[1]).ok ~= 'list' then return -1 end
local head = redis.call('LRANGE', KEYS[1], 0, count - 1)
for i = 1, count do
  if head[i] ~= ARGV[3 * i - 2] then return -1 end
end
for i = 1, count do
  local record, id = ARGV[3 * i - 2], ARGV[3 * i - 1]
  if id == '' then id = '?' .. redis.sha1hex(record) end
  local n = 1
  while redis.call('HSETNX', KEYS[3], id .. '#' .. n, record) == 0 do n = n + 1 end
  redis.call('ZADD', KEYS[2], ARGV[3 * i], id .. '#' .. n)
end
redis.call('LTRIM', KEYS[1], count, -1)
return count
