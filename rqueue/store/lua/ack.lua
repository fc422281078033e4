-- ack.lua: forget tasks that completed, and keep the results of those that keep one.
-- KEYS[1] reserved zset   KEYS[2] the queue's event stream ("succeeded" for each task)
-- KEYS[3..] (optional) for each kept result, its six keys (keep_result.lua: its result
-- key, its done list, the queue's finished index, its dependents set, the queue's
-- resolved and timer lists)
-- ARGV[1] the event stream's cap; 0: no events (see events.lua)
-- ARGV[2] the plain acks: the reserved payloads, the exact bytes reserve.lua returned,
-- as one msgpack array (one argument: packed in C, not one argument each in Python)
-- then one triple per kept result: reserved payload, result record (msgpack, built by
-- the worker), milliseconds to keep it
-- Returns how many were still reserved.
-- Invariant: a completed task is in no key of its queue afterwards, and its result is
-- written in the same step: a caller never sees it finished without its result. The
-- done list gets one token that a waiting caller moves in place (BLMOVE done done),
-- so every waiter wakes and the token stays for those who come later. A kept task
-- leaves the reserved set only once its result is written: if Redis refuses the record
-- (an error ends the script there), that task and those after it are still reserved,
-- and the worker acks them one at a time and fails the one refused (reservations.py).
-- @header
-- @dependents
-- @keep_result
-- @events
local cap, acks = tonumber(ARGV[1]), cmsgpack.unpack(ARGV[2])
local removed = 0
if #acks > 0 then removed = redis.call('ZREM', KEYS[1], unpack(acks)) end
if cap > 0 then
  for _, acked in ipairs(acks) do task_event(KEYS[2], cap, 'succeeded', acked) end
end
for i = 1, (#KEYS - 2) / 6 do
  local at = 3 + 3 * (i - 1)
  keep_result(6 * i - 3, ARGV[at + 1], ARGV[at + 2], ARGV[at])
  removed = removed + redis.call('ZREM', KEYS[1], ARGV[at])
  if cap > 0 then task_event(KEYS[2], cap, 'succeeded', ARGV[at]) end
end
return removed
