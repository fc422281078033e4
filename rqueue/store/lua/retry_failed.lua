-- retry_failed.lua: take failed records off the failed index, and with 'retry' put
-- their tasks back on their queue with their attempts reset.
-- KEYS[1] failed index (zset: record key -> failed at, µs)   KEYS[2] failed records (hash)
-- With 'retry' only: KEYS[3] ready list   KEYS[4] notify list
-- KEYS[5] pending-ids set: each task is pending again, so it can be cancelled
-- KEYS[5 + i] the i-th task's result key: if it keeps its result, the record of
--         its failure is replaced by a status record saying it is pending (push.lua's),
--         kept as long as the failure was
-- ARGV[1] 'retry' (push each back), 'forget' (drop them) or 'flush' (drop the oldest)
-- retry, forget: ARGV[3i - 1] the i-th record's key as read, ARGV[3i] its exact bytes,
--         ARGV[3i + 1] its payload with attempts 0 ('' for forget). One record for
--         `rqueue failed retry ID`, a chunk of them (failed.STEP) for `--all`.
-- flush: ARGV[2] how many of the oldest records to drop (failed.STEP).
-- Returns how many records were still there, and so were retried or dropped.
-- Invariant: a retried task leaves the failed records and enters the ready list
-- together, and two concurrent retries of one record push it once. A call costs
-- O(records * log n) in a handful of multi-key commands, whatever n the index holds.
-- The records of one id keep filling "<id>#1" to "<id>#m" (fail.lua): the ones after a
-- removed record move down into its gap, so a record read as "<id>#3" may be at
-- "<id>#1" by the time it is retried, and is looked for among its id's records by its
-- bytes when it is not where it was read.
-- @header
local index, records = KEYS[1], KEYS[2]

-- split(key): the id and the n of a key "<id>#<n>"; nil for a key of another shape.
local function split(key)
  local id, n = string.match(key, '^(.*)#(%d+)$')
  return id, tonumber(n)
end

-- find(key, record, held, taken): the key `record` is at now: `key` (whose bytes are
-- `held`), else another of its id's keys holding the same bytes; nil if it is gone.
-- A key in `taken` is taken by this call already (one record is taken once).
local function find(key, record, held, taken)
  if held == record and not taken[key] then return key end
  local id = split(key)
  local n = 1
  while id do
    local bytes = redis.call('HGET', records, id .. '#' .. n)
    if not bytes then return nil end
    if bytes == record and not taken[id .. '#' .. n] then return id .. '#' .. n end
    n = n + 1
  end
  return nil
end

-- pack(id, removed): move the id's kept records down to #1, #2, ... in their order (their
-- scores unchanged). Its records filled #1 to #m before this call, so they are the
-- slots from #1 up to the first that is neither kept nor in `removed`.
local function pack(id, removed)
  local kept, n = {}, 1
  while redis.call('HEXISTS', records, id .. '#' .. n) == 1 or removed[n] do
    if not removed[n] then kept[#kept + 1] = n end
    n = n + 1
  end
  for slot, from in ipairs(kept) do
    if from ~= slot then
      local source, target = id .. '#' .. from, id .. '#' .. slot
      redis.call('HSET', records, target, redis.call('HGET', records, source))
      redis.call('ZADD', index, redis.call('ZSCORE', index, source), target)
      redis.call('HDEL', records, source)
      redis.call('ZREM', index, source)
    end
  end
end

-- remove(keys): delete these records, then pack each id that a removal left a gap in
-- (a removed #n followed by a kept #n+1): typically one HMGET says there is none.
local function remove(keys)
  if #keys == 0 then return end
  redis.call('ZREM', index, unpack(keys))
  redis.call('HDEL', records, unpack(keys))
  local nexts, removed = {}, {}
  for i, key in ipairs(keys) do
    local id, n = split(key)
    nexts[i] = id and (id .. '#' .. (n + 1)) or key
    if id then
      removed[id] = removed[id] or {}
      removed[id][n] = true
    end
  end
  local after = redis.call('HMGET', records, unpack(nexts))
  for i, key in ipairs(keys) do
    local id = split(key)
    if after[i] and removed[id] then
      pack(id, removed[id])
      removed[id] = nil
    end
  end
end

if ARGV[1] == 'flush' then
  local oldest = redis.call('ZRANGE', index, 0, tonumber(ARGV[2]) - 1)
  remove(oldest)
  return #oldest
end

local asked = {}
for i = 1, (#ARGV - 1) / 3 do asked[i] = ARGV[3 * i - 1] end
if #asked == 0 then return 0 end
local held = redis.call('HMGET', records, unpack(asked))
local taken, keys, found = {}, {}, {}
for i = 1, #asked do
  local key = find(asked[i], ARGV[3 * i], held[i], taken)
  if key then
    taken[key] = true
    keys[#keys + 1] = key
    found[#found + 1] = i
  end
end
remove(keys)
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
if #payloads > 0 then
  redis.call('RPUSH', KEYS[3], unpack(payloads))
  if redis.call('LLEN', KEYS[4]) == 0 then redis.call('RPUSH', KEYS[4], 1) end
end
if #ids > 0 then redis.call('SADD', KEYS[5], unpack(ids)) end
return #found
