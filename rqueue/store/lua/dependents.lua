-- dependents.lua: telling the tasks that wait for a task (using(after=...)) that it
-- finished, for the scripts that write a task's outcome (keep_result.lua's users,
-- cancel.lua, settle_cancelled.lua). Not a script of its own: scripts.py puts it where
-- a script has "-- @dependents", before "-- @keep_result".
-- notify_dependents(dependents, resolved, timer, id, record): if tasks wait for the
-- task `id` (raw 16 bytes), its `dependents` set (depend.lua registered them) becomes one
-- notice at the tail of the queue's `resolved` list, msgpack [id, its outcome record,
-- [member, ...]], and a token on the queue's timer list wakes a worker parent to apply
-- it (workflows/dependencies.py). One TYPE per outcome written: a task nobody waits for
-- pays nothing more, and a key of another type there is left alone, never an error
-- that would stop the script writing the outcome.
local function notify_dependents(dependents, resolved, timer, id, record)
  if redis.call('TYPE', dependents)['ok'] ~= 'set' then return end
  redis.call('RPUSH', resolved, cmsgpack.pack({id, record, redis.call('SMEMBERS', dependents)}))
  redis.call('DEL', dependents)
  if redis.call('LLEN', timer) == 0 then redis.call('RPUSH', timer, 0) end
end
