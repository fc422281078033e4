-- ack.lua: forget tasks that completed, and keep the results of those that keep one.
-- KEYS[1] reserved zset
-- KEYS[2..] (optional) for each kept result, its result key, its done list and the
-- queue's finished index (keep_result.lua)
-- ARGV[1] n: how many plain acks follow
-- ARGV[2..1+n] reserved payloads, the exact bytes reserve.lua returned
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
-- @keep_result
local plain = tonumber(ARGV[1])
local removed = 0
if plain > 0 then removed = redis.call('ZREM', KEYS[1], unpack(ARGV, 2, 1 + plain)) end
for i = 1, (#KEYS - 1) / 3 do
  local at = 2 + plain + 3 * (i - 1)
  keep_result(KEYS[3 * i - 1], KEYS[3 * i], KEYS[3 * i + 1], ARGV[at + 1], ARGV[at + 2], ARGV[at])
  removed = removed + redis.call('ZREM', KEYS[1], ARGV[at])
end
return removed
