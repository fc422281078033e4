-- cancelled.lua: what cancelling a task changes besides where its payload is, for the
-- scripts that cancel one (cancel.lua while it is pending, settle_cancelled.lua once it
-- ran). Not a script of its own: scripts.py puts it where a script has "-- @cancelled".
-- mark_cancelled(result, done): if the task keeps its result (its status record exists),
-- the record says cancelled for the time it had left, and whoever waits for it wakes
-- (one token in its done list, as keep_result.lua leaves it). Returns the record it
-- wrote, or nil: the scripts tell the tasks waiting for it with that (dependents.lua).
local function mark_cancelled(result, done)
  local ttl = redis.call('PTTL', result)
  if ttl > 0 then
    local record = cmsgpack.pack({state = 'cancelled'})
    redis.call('SET', result, record, 'PX', ttl)
    redis.call('DEL', done)
    redis.call('RPUSH', done, 1)
    redis.call('PEXPIRE', done, ttl)
    return record
  end
end
-- drop_unique_lock(unique, id): release the unique lock the task `id` (32 hex
-- characters) holds, as release_unique.lua does, so that no dispatch is deduplicated
-- against a task already cancelled. A key of another type is left alone.
local function drop_unique_lock(unique, id)
  local key = redis.call('TYPE', unique)['ok'] == 'hash' and redis.call('HGET', unique, 'id:' .. id)
  if key then
    redis.call('HDEL', unique, 'id:' .. id)
    local held = redis.call('HGET', unique, 'key:' .. key)
    if held and string.sub(held, 1, #id + 1) == id .. ' ' then redis.call('HDEL', unique, 'key:' .. key) end
  end
end
