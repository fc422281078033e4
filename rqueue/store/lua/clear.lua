-- clear.lua: delete every pending task of a queue (ready, delayed, reserved); failed stays.
-- KEYS[1] ready list   KEYS[2] delayed zset   KEYS[3] reserved zset
-- KEYS[4] notify list  KEYS[5] timer list
-- KEYS[6] pending-ids set   KEYS[7] cancelled set (cancel's bookkeeping goes too)
-- Returns how many tasks were deleted.
local count = redis.call('LLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2])
  + redis.call('ZCARD', KEYS[3])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
return count
