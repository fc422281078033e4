-- retry_failed.lua: take failed records off a queue's failed list, and with 'retry' put
-- their tasks back on their queue with their attempts reset.
-- KEYS[1] failed list   KEYS[2] failed lookup (failed_list.lua)
-- With 'retry' only: KEYS[3] ready list   KEYS[4] notify list
-- KEYS[5] pending-ids set: each task is pending again, so it can be cancelled
-- KEYS[5 + i] the i-th task's result key: if it keeps its result, the record of
--         its failure is replaced by a status record saying it is pending (push.lua's),
--         kept as long as the failure was
-- then the queue's 14 priority keys (levels.lua): once the queue had prioritised
--         tasks, each task goes back to its own level's list
-- ARGV[1] 'retry' (push each back), 'forget' (drop them) or 'flush' (drop the oldest)
-- retry, forget: ARGV[3i - 1] the i-th record's member as read ("<id>#<n>"), ARGV[3i]
--         its exact bytes, ARGV[3i + 1] its payload with attempts 0 ('' for forget). One
--         record for `rqueue failed retry ID`, a chunk of them (failed.STEP) for `--all`.
-- flush: ARGV[2] how many of the oldest records to drop (failed.STEP).
-- Returns how many records were still there, and so were retried or dropped.
-- Invariant: a retried task leaves the failed list and enters the ready list together,
-- and two concurrent retries of one record push it once. The list and the lookup stay
-- in step (failed_list.lua). A record's member may have moved down since it was read
-- (a record of its id before it was removed): it is then looked for among its id's
-- members by its bytes. A call costs O(records * log n) and a walk from the nearer end
-- of the list to the farthest record it takes, whatever n the list holds.
-- @header
-- @levels
-- @failed_list
local list, lookup = KEYS[1], KEYS[2]
reindex(list, lookup)

if ARGV[1] == 'flush' then
  local oldest = redis.call('ZRANGE', lookup, 0, tonumber(ARGV[2]) - 1)
  if #oldest == 0 then return 0 end
  redis.call('LTRIM', list, 0, -#oldest - 1)
  forget_members(lookup, oldest)
  return #oldest
end

local total = redis.call('LLEN', list)

-- holds(member, record, taken): the rank of `member` if it is filed, not taken by this
-- call, and its record is `record`; else nil.
local function holds(member, record, taken)
  if taken[member] then return nil end
  local rank = redis.call('ZREVRANK', lookup, member)
  if rank and at(list, rank, total) == record then return rank end
  return nil
end

-- find(member, record, taken): where `record` is filed now, and its rank: `member`,
-- else another of its id's members holding the same bytes; nil if it is gone.
local function find(member, record, taken)
  local rank = holds(member, record, taken)
  if rank then return member, rank end
  local id = split(member)
  local n = 1
  while id and redis.call('ZSCORE', lookup, id .. '#' .. n) do
    rank = holds(id .. '#' .. n, record, taken)
    if rank then return id .. '#' .. n, rank end
    n = n + 1
  end
  return nil
end

local taken, members, ranks, found = {}, {}, {}, {}
for i = 1, (#ARGV - 1) / 3 do
  local member, rank = find(ARGV[3 * i - 1], ARGV[3 * i], taken)
  if member then
    taken[member] = true
    members[#members + 1] = member
    ranks[#ranks + 1] = rank
    found[#found + 1] = i
  end
end
remove(list, lookup, members, ranks)
if ARGV[1] ~= 'retry' then return #found end

local payloads, ids = {}, {}
local now
for _, i in ipairs(found) do
  local payload = ARGV[3 * i + 1]
  payloads[#payloads + 1] = payload
  local id = payload_id(payload)
  if id then
    ids[#ids + 1] = id
    local ttl = redis.call('PTTL', KEYS[5 + i])
    if ttl > 0 then
      if now == nil then
        local time = redis.call('TIME')
        now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
      end
      redis.call('SET', KEYS[5 + i], cmsgpack.pack({state = 'pending', due = now}), 'PX', ttl)
    end
  end
end
-- One RPUSH and one SADD for the chunk (unpack() takes a few thousand values).
local levels_at = #KEYS - 13
if #payloads > 0 and redis.call('EXISTS', KEYS[levels_at + 11]) == 1 then
  for _, payload in ipairs(payloads) do
    local level, group = payload_level(payload, true)
    to_level(levels_at, level, payload, false, group)
  end
  if redis.call('LLEN', KEYS[4]) == 0 then redis.call('RPUSH', KEYS[4], 1) end
elseif #payloads > 0 then
  redis.call('RPUSH', KEYS[3], unpack(payloads))
  if redis.call('LLEN', KEYS[4]) == 0 then redis.call('RPUSH', KEYS[4], 1) end
end
if #ids > 0 then redis.call('SADD', KEYS[5], unpack(ids)) end
return #found
