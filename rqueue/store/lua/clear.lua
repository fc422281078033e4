-- clear.lua: delete every pending task of a queue (ready, delayed, reserved); failed stays.
-- KEYS[1] ready list   KEYS[2] delayed zset   KEYS[3] reserved zset
-- KEYS[4] notify list  KEYS[5] timer list
-- KEYS[6] pending-ids set   KEYS[7] cancelled set (cancel's bookkeeping goes too)
-- KEYS[8] unique locks hash: the locks of the tasks deleted go with them (a task that
-- is running meanwhile then releases nothing: its lock is gone)
-- KEYS[9] the waiting hash (tasks waiting for their dependencies, two fields each): they
-- go too; a notice that comes for one later finds nothing and changes nothing
-- KEYS[10..23] the queue's priority levels (levels.lua; KEYS[15] is KEYS[1]): their
-- tasks are counted and deleted with the levels set, the marker and the aging hash,
-- and the groups' tasks with their turns (groups.lua: one list a group with tasks)
-- Returns how many tasks were deleted.
-- UNLINK, not DEL: the keys leave the keyspace at once, in this one atomic step, and
-- Redis frees their memory on its background thread. DEL freed it here, element by
-- element (500,000 tasks held Redis ~100 ms); UNLINK costs the same for any size, so
-- the clear needs no chunks and no push or reserve ever sees a queue half cleared.
local count = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3])
for level = 0, 9 do count = count + redis.call('LLEN', KEYS[10 + level]) end
for _, group in ipairs(redis.call('ZRANGE', KEYS[23], 0, -1)) do
  if group ~= '' then  -- '' is the ready list's turn, counted above
    count = count + redis.call('LLEN', KEYS[23] .. group)
    redis.call('UNLINK', KEYS[23] .. group)
  end
end
if redis.call('TYPE', KEYS[9])['ok'] == 'hash' then count = count + math.floor(redis.call('HLEN', KEYS[9]) / 2) end
redis.call('UNLINK', unpack(KEYS))
return count
