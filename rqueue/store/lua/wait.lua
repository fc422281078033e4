-- wait.lua: a task dispatched using(after=...) waits in its queue's waiting hash, not in
-- the ready list, until every task it waits for finished (resolve.lua moves it on).
-- KEYS[1] the queue's waiting hash   KEYS[2] its pending-ids set (so the task can be
-- cancelled while it waits, as any pending task: cancel.lua)   KEYS[3] (optional) its
-- result key, if it keeps its result: a status record `waiting`
-- ARGV[1] the task's id (32 hex characters)   ARGV[2] its 16 raw bytes   ARGV[3] the
-- payload   ARGV[4] its state: 'a' (run whatever the outcomes) or 'n', then one '-' per
-- task it waits for   ARGV[5] how long the status record lasts (ms)
-- Returns 1.
-- Invariant: written before the task registers with any dependency (depend.lua), so a
-- notice never comes for a task not there yet.
redis.call('HSET', KEYS[1], 'p:' .. ARGV[1], ARGV[3], 's:' .. ARGV[1], ARGV[4])
redis.call('SADD', KEYS[2], ARGV[2])
if KEYS[3] then
  redis.call('SET', KEYS[3], cmsgpack.pack({state = 'waiting'}), 'PX', ARGV[5])
end
return 1
