-- push.lua: add tasks to a queue, ready now or after a delay; a unique task only if
-- its lock is free, taking the lock in the same call.
-- KEYS[1] ready list (for a priority level other than 5, that level's list; for a group,
--         the group's list, see groups.lua)   KEYS[2] delayed zset   KEYS[3] notify list   KEYS[4] timer list
-- KEYS[5] pending-ids set (the payloads' ids are added, one SADD per call: O(1) per
--         payload, so that cancel.lua can cancel a task by id without a scan)
-- KEYS[6] the queue's events marker: while a worker records events (it holds the
--         stream's cap), each payload pushed adds a "dispatched" event to
-- KEYS[7] the queue's event stream (see events.lua)
-- KEYS[8] the unique locks hash, if ARGV[3] > 0 (keys.py's QueueKeys.unique)
-- then, for a priority level other than 5 or a group (ARGV[3]), the queue's levels set and
-- its marker that it has had prioritised or grouped tasks (levels.lua), and for a group
-- the groups' turns: a task pushed ready notes its level in the set (a group: 5, and the
-- group joins the turns if it had no task), a delayed one sets the marker only
-- (migrate.lua reads its level and group)
-- then (optional) the result keys of the payloads that keep
--         their result: each gets a status record saying the task is pending or
--         delayed (and when it is due), so a caller can tell "queued" from "never heard
--         of" (results.py)
-- ARGV[1] delay in milliseconds (0 or less: ready now)
-- ARGV[2] how long those status records last, in milliseconds
-- ARGV[3] how many unique locks follow (0: a plain push), and for a priority level other
--         than 5, ':' and the level ("0:2"), for a group ':5:' and its name ("0:5:acme"),
--         so that a plain push's call is unchanged
-- ARGV[4..] four per lock: its payload's place among the payloads (from 1), the lock's
--         key, its owner (that payload's task id), how long it lasts in milliseconds
-- then the payloads
-- Returns, for a plain push, the length of the list or set the payloads went into; with
-- locks, the deduplicated tasks as a flat list: id, id of the lock's owner, ...
-- Invariant: each payload pushed is in exactly one of ready or delayed; an idle worker
-- blocked on notify wakes for ready tasks, and a parent blocked on timer wakes when the
-- earliest due time moves earlier. Due times come from Redis TIME, the one clock.
-- A lock is held by one task id until that id releases it (release_unique.lua,
-- cancel.lua), clear.lua drops them all, or it expires; an expired one is taken over
-- here. The lock is checked before any write, so a refusal leaves nothing behind.
-- @header
-- @events
local delay = tonumber(ARGV[1])
local locks, level, group = string.match(ARGV[3], '^(%d+):?(%d*):?(.*)$')
locks, level = tonumber(locks), tonumber(level) or 5
if group == '' then group = false end
local payloads, first, results = ARGV, 4 + 4 * locks, 8
local deduplicated, dropped = {}, {}
local unique = KEYS[8]
if locks > 0 then results = 9 end
local levels_set, used, turns = false, false, false
if level ~= 5 or group then levels_set, used, results = KEYS[results], KEYS[results + 1], results + 2 end
if group then turns, results = KEYS[results], results + 1 end
if locks > 0 then
  local kind = redis.call('TYPE', unique)['ok']
  if kind ~= 'hash' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. unique .. " holds a " .. kind ..
      ", not rqueue's unique locks (a hash): delete it to dispatch unique tasks")
  end
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local skip = {}
  for i = 4, first - 1, 4 do
    local field, owner, lasts = 'key:' .. ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
    local holder, expires = string.match(redis.call('HGET', unique, field) or '', '^(%S+) (%d+)$')
    if holder and tonumber(expires) > now then
      skip[tonumber(ARGV[i])] = true
      dropped[owner] = true
      deduplicated[#deduplicated + 1] = owner
      deduplicated[#deduplicated + 1] = holder
    else
      if holder then redis.call('HDEL', unique, 'id:' .. holder) end
      redis.call('HSET', unique, field, owner .. ' ' .. (now + lasts), 'id:' .. owner, ARGV[i + 1])
      if redis.call('PTTL', unique) < lasts then redis.call('PEXPIRE', unique, lasts) end
    end
  end
  if #deduplicated > 0 then
    payloads = {}
    for i = first, #ARGV do
      if not skip[i - first + 1] then payloads[#payloads + 1] = ARGV[i] end
    end
    first = 1
    if #payloads == 0 then return deduplicated end
  end
end
local ids = {}
for i = first, #payloads do
  ids[#ids + 1] = payload_id(payloads[i])
end
if #ids > 0 then redis.call('SADD', KEYS[5], unpack(ids)) end
if #KEYS >= results then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local state = 'pending'
  if delay > 0 then state = 'delayed' end
  local record = cmsgpack.pack({state = state, due = now + math.max(delay, 0)})
  for i = results, #KEYS do
    if not dropped[string.sub(KEYS[i], -32)] then redis.call('SET', KEYS[i], record, 'PX', ARGV[2]) end
  end
end
local reply
if delay <= 0 then
  reply = redis.call('RPUSH', KEYS[1], unpack(payloads, first))
  if levels_set then redis.call('SADD', levels_set, level) end
  if turns and reply == #payloads - first + 1 then  -- the group had none: it joins last
    local last = redis.call('ZRANGE', turns, -1, -1, 'WITHSCORES')
    redis.call('ZADD', turns, 'NX', tonumber(last[2] or 0) + 1, group)
  end
  if redis.call('LLEN', KEYS[3]) == 0 then redis.call('RPUSH', KEYS[3], 1) end
else
  local time = redis.call('TIME')
  local due = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + delay
  local earliest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  for i = first, #payloads do
    redis.call('ZADD', KEYS[2], due, payloads[i])
  end
  if earliest[2] == nil or due < tonumber(earliest[2]) then
    redis.call('DEL', KEYS[4])
    redis.call('RPUSH', KEYS[4], due)
  end
  reply = redis.call('ZCARD', KEYS[2])
end
if used then redis.call('SET', used, 1) end
local cap = marked_cap(KEYS[6])  -- once they are in: an event only for what happened
if cap then
  for i = first, #payloads do task_event(KEYS[7], cap, 'dispatched', payloads[i]) end
end
if locks > 0 then return deduplicated end
return reply
