-- slot_free.lua: free a run's slot (Concurrency) and wake the first parked call.
-- KEYS[1] the key's slots (slot_take.lua)   KEYS[2] the key's waiters
-- KEYS[3] delayed zset   KEYS[4] ready list   KEYS[5] notify list
-- KEYS[6..19] the queue's priority keys (levels.lua): a woken call goes to the front of
-- its own level's list, read from its payload once the queue had prioritised tasks
-- ARGV[1] the token that took the slot
-- Returns 0 if the token held no slot (it expired: whoever took it since woke then),
-- 1 if freed with no call waiting, 2 if freed and a parked call was made ready.
-- Invariant: only the slot's owner frees it; a waiter is moved only while it is still
-- in the delayed set, so a call its own timer already woke (or that was cancelled)
-- is dropped from the line, never pushed twice.
-- @header
-- @levels
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
while true do
  local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not first then return 1 end
  redis.call('ZREM', KEYS[2], first)
  if redis.call('ZREM', KEYS[3], first) == 1 then
    local used = redis.call('EXISTS', KEYS[17]) == 1
    local level, group = payload_level(first, used)
    to_level(6, level, first, true, group)  -- at the front: it waited its turn
    if redis.call('LLEN', KEYS[5]) == 0 then redis.call('RPUSH', KEYS[5], 1) end
    return 2
  end
end
