-- failed_list.lua: what the scripts of a queue's failed list share. Not a script of its
-- own: scripts.py puts it where a script has the line "-- @failed_list".
-- The failed list (KEYS: `list`) is the store: one element per failure, the record's
-- bytes, the newest at the head (LPUSH), so LRANGE 0 49 is the newest page and LLEN
-- the count. Beside it the lookup (`lookup`), a zset with one member "<task id>#<n>"
-- per record, scored by a sequence number that rises in the order records came.
-- Invariant: LLEN(list) == ZCARD(lookup), and the record at list index i is the one
-- whose member has ZREVRANK i. So a record is found by its id in O(log n) (its rank is
-- its index), and one task's records fill n = 1 to m with no gap (the first free n
-- when filed; the ones after a removed record move down into its gap), so the first
-- missing n ends a search for an id's records.
-- A hand edit that breaks the invariant (an LPUSH, LREM or DEL of one key alone) is
-- mended by the next script that notices the counts differ: it indexes the list anew.

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

-- free_member(lookup, record): the member a new record is filed under, "<id>#<n>" with
-- the first free n (bytes with no id: '?' and their SHA-1 for the id).
local function free_member(lookup, record)
  local id = record_id(record) or ('?' .. redis.sha1hex(record))
  local n = 1
  while redis.call('ZSCORE', lookup, id .. '#' .. n) do n = n + 1 end
  return id .. '#' .. n
end

-- split(member): the id and the n of a member "<id>#<n>"; nil for another shape.
local function split(member)
  local id, n = string.match(member, '^(.*)#(%d+)$')
  return id, tonumber(n)
end

-- reindex(list, lookup): file every record of the list anew, oldest first, when the
-- counts say a hand edit broke the invariant. O(n) once; never on an intact list.
local function reindex(list, lookup)
  local total = redis.call('LLEN', list)
  if total == redis.call('ZCARD', lookup) then return end
  redis.call('DEL', lookup)
  for last = total - 1, 0, -1000 do
    local records = redis.call('LRANGE', list, math.max(0, last - 999), last)
    for i = #records, 1, -1 do
      redis.call('ZADD', lookup, total - (last - #records + i), free_member(lookup, records[i]))
    end
  end
end

-- next_sequence(lookup): the score the next record takes.
local function next_sequence(lookup)
  local newest = redis.call('ZREVRANGE', lookup, 0, 0, 'WITHSCORES')[2]
  return (newest and tonumber(newest) or 0) + 1
end

-- pack(lookup, id, removed): move the id's kept members down to #1, #2, ... in their
-- order (scores unchanged). They filled #1 to #m before the removal, so they are the
-- members from #1 up to the first that is neither kept nor in `removed` (n -> true).
local function pack(lookup, id, removed)
  local kept, n = {}, 1
  while redis.call('ZSCORE', lookup, id .. '#' .. n) or removed[n] do
    if not removed[n] then kept[#kept + 1] = n end
    n = n + 1
  end
  for slot, from in ipairs(kept) do
    if from ~= slot then
      local source = id .. '#' .. from
      redis.call('ZADD', lookup, redis.call('ZSCORE', lookup, source), id .. '#' .. slot)
      redis.call('ZREM', lookup, source)
    end
  end
end

-- forget_members(lookup, members): take these members off the lookup (their records
-- left the list in the same step), then close the gaps they left in their ids' runs.
local function forget_members(lookup, members)
  if #members == 0 then return end
  redis.call('ZREM', lookup, unpack(members))
  local removed = {}
  for _, member in ipairs(members) do
    local id, n = split(member)
    if id then
      removed[id] = removed[id] or {}
      removed[id][n] = true
    end
  end
  for id, ns in pairs(removed) do pack(lookup, id, ns) end
end

-- remove(list, lookup, members, ranks): delete the records of these members (each
-- present; `ranks`, if given, their ZREVRANKs already read) from the list and the lookup. Each record is marked in place (LSET) and the marks
-- removed by one LREM from the nearer end, so a record near either end costs little
-- and one in the middle of a million a scan of half the list (a few ms); the mark is
-- unique to the call, so no record can be taken for it.
local function remove(list, lookup, members, ranks)
  if #members == 0 then return end
  local total = redis.call('LLEN', list)
  local time = redis.call('TIME')
  local mark = '\0rqueue removed\0' .. redis.sha1hex(time[1] .. '.' .. time[2] .. members[1])
  local front, back = 0, 0
  for i, member in ipairs(members) do
    local rank = ranks and ranks[i] or redis.call('ZREVRANK', lookup, member)
    if rank < total / 2 then
      redis.call('LSET', list, rank, mark)
      front = front + 1
    else
      redis.call('LSET', list, rank - total, mark)
      back = back + 1
    end
  end
  if front > 0 then redis.call('LREM', list, front, mark) end
  if back > 0 then redis.call('LREM', list, -back, mark) end
  forget_members(lookup, members)
end

-- at(list, rank, total): the record at `rank` (0 the newest), read from the nearer end.
local function at(list, rank, total)
  if rank < total / 2 then return redis.call('LINDEX', list, rank) end
  return redis.call('LINDEX', list, rank - total)
end

-- between(list, first, last, total): the records at ranks `first` to `last` (0 the
-- newest), newest first. LRANGE walks to `first` from the head on Redis 6 (Redis 7 from
-- the nearer end); near the tail, one LINDEX per record from the tail costs less.
local function between(list, first, last, total)
  if (last - first + 1) * (total - first) >= first then
    return redis.call('LRANGE', list, first, last)
  end
  local records = {}
  for rank = first, last do records[#records + 1] = redis.call('LINDEX', list, rank - total) end
  return records
end
