-- retry_failed.lua: put failed tasks back on their queue with their attempts reset.
-- KEYS[1] failed list   KEYS[2] ready list   KEYS[3] notify list
-- KEYS[4] pending-ids set: each task is pending again, so it can be cancelled
-- KEYS[4 + i] the i-th task's result key: if it keeps its result, the record of its
--         failure is replaced by a status record saying it is pending (push.lua's),
--         kept as long as the failure was
-- ARGV[1] where LREM starts looking: 1 from the oldest, -1 from the newest (LREM's
--         cost is the records it passes: a chunk of `retry --all` is at the head, and
--         one record is looked for from the end it is nearer to)
-- ARGV[2i] the i-th failed record (exact bytes)   ARGV[2i + 1] its payload, attempts 0
-- One record for `rqueue failed retry ID`, a chunk of them (failed.CHUNK) for `--all`.
-- Returns how many records were still there, and so were pushed.
-- Invariant: a retried task leaves the failed list and enters the ready list together,
-- and two concurrent retries of one record push it once.
local payloads, ids = {}, {}
local now
for i = 1, (#ARGV - 1) / 2 do
  local payload = ARGV[2 * i + 1]
  if redis.call('LREM', KEYS[1], ARGV[1], ARGV[2 * i]) == 1 then
    payloads[#payloads + 1] = payload
    if #payload > 70 and string.sub(payload, 37, 38) == '\217\32' then
      ids[#ids + 1] = string.sub(payload, 39, 70)
      local ttl = redis.call('PTTL', KEYS[4 + i])
      if ttl > 0 then
        if now == nil then
          local time = redis.call('TIME')
          now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
        end
        redis.call('SET', KEYS[4 + i], cmsgpack.pack({state = 'pending', due = now}), 'PX', ttl)
      end
    end
  end
end
-- One RPUSH and one SADD for the chunk (unpack() takes a few thousand values).
if #payloads > 0 then
  redis.call('RPUSH', KEYS[2], unpack(payloads))
  if redis.call('LLEN', KEYS[3]) == 0 then redis.call('RPUSH', KEYS[3], 1) end
end
if #ids > 0 then redis.call('SADD', KEYS[4], unpack(ids)) end
return #payloads
