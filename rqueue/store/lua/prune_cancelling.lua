-- prune_cancelling.lua: forget cancel requests for tasks that are no longer running.
-- KEYS[1] reserved zset   KEYS[2] cancelling hash (cancel.lua)
-- Returns how many requests were forgotten.
-- Invariant: a request stays while its task is reserved. One whose task finished first
-- (acked, failed, or moved back by its reservation's expiry) is left by those scripts,
-- so that acknowledging, the hot path, pays nothing for cancels; a worker parent that
-- sees requests it cannot deliver runs this instead (supervisor.py), a read of the
-- reserved set, the tasks in flight.
-- @header
local requested = redis.call('HKEYS', KEYS[2])
if #requested == 0 then return 0 end
local running = {}
for _, payload in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local id = payload_id(payload)
  if id then running[id] = true end
end
local stale = {}
for _, id in ipairs(requested) do
  if not running[id] then stale[#stale + 1] = id end
end
if #stale > 0 then redis.call('HDEL', KEYS[2], unpack(stale)) end
return #stale
