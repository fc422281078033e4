-- debounce.lua: dispatch a debounced task's call (``@task(debounce=)``): the first
-- call of a burst is delayed by the debounce; each later one replaces it (its payload,
-- so its arguments, are the latest) and pushes its due time out again, up to the cap.
-- KEYS[1..7] as push.lua (ready, delayed, notify, timer, pending-ids, events marker,
-- event stream: a "dispatched" event while a worker records events there)
-- KEYS[8] the call's debounce entry (QueueKeys.debounce(key)), a hash: "payload" -> the
-- pending call's payload as it sits in the delayed zset, "first" -> when its burst
-- began (ms); it expires a second after the call is due
-- KEYS[9] the queue's marker that it has had prioritised tasks (levels.lua): set if the
-- payload carries a level other than 5, so migrate.lua puts it on its level when due
-- KEYS[10] (optional) the payload's result key: its status record says it is delayed
-- until its due time, as push.lua writes it
-- ARGV[1] the payload (signed if a secret is set)
-- ARGV[2] '1' if the payload carries the id of the call pending for its key (the
-- caller learnt it from a reply 'retry' below) and is to replace it; '' if it carries
-- a new id, for a new burst
-- ARGV[3] the debounce in ms   ARGV[4] the cap (debounce_max) in ms; 0: none
-- ARGV[5] how long the status record lasts, in ms
-- Returns {outcome, id, due ms}: outcome 'scheduled' (a new burst: a new delayed
-- call), 'replaced' (the pending call now carries this payload, due a debounce from
-- now) or 'capped' (replaced, due when the cap says: debounce_max after the burst
-- began); id: the raw 16 bytes of the call that will run. Or {'retry', id} with
-- nothing written: the payload's id is not the pending call's (id: the pending one's,
-- to send again with it and ARGV[2] '1'; '': no call is pending any more, to send
-- again with a new id and ARGV[2] '').
-- Invariant: per key at most one call is pending, and each payload pushed is in
-- exactly one of ready or delayed (push.lua's); its id in pending-ids while pending.
-- A call is pending while its payload is in the delayed zset with a due time still
-- ahead and its id is in pending-ids: once due (moved to ready, or about to be) it
-- belongs to the window that closed, so the next dispatch starts a new burst; a
-- cancelled call (cancel.lua takes its id out of pending-ids) ends its burst too. An
-- id is never reused: a replacement keeps the pending call's id, a new burst gets
-- a new one. Redis data is not trusted: an entry of another type or with garbled
-- fields reads as no call pending (its "first" as now, if its call is pending).
-- @header
-- @levels
-- @events
local payload, replacing = ARGV[1], ARGV[2] == '1'
local wait, cap_ms = tonumber(ARGV[3]), tonumber(ARGV[4])
local id = payload_id(payload)
if not id then return redis.error_reply('ERR debounce.lua: not an rqueue payload') end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local entry = KEYS[8]
local kind = redis.call('TYPE', entry)['ok']

-- pending(): the pending call's payload, its id and when its burst began, or nil
local function pending()
  if kind ~= 'hash' then return nil end
  local fields = redis.call('HMGET', entry, 'payload', 'first')
  local old = fields[1]
  if not old then return nil end
  local old_id = payload_id(old)
  local due = tonumber(redis.call('ZSCORE', KEYS[2], old) or '')
  if not old_id or not due or not (due > now) then return nil end
  if redis.call('SISMEMBER', KEYS[5], old_id) == 0 then return nil end
  local first = tonumber(fields[2] or '')
  if not (first and first > 0 and first <= now) then first = now end
  return old, old_id, first
end

local old, old_id, first = pending()
local outcome, due = 'scheduled', now + wait
if old then
  if not replacing or old_id ~= id then return {'retry', old_id} end
  outcome = 'replaced'
  if cap_ms > 0 and first + cap_ms < due then outcome, due = 'capped', first + cap_ms end
  redis.call('ZREM', KEYS[2], old)
else
  if replacing then return {'retry', ''} end
  first = now
  redis.call('SADD', KEYS[5], id)
end
local earliest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
redis.call('ZADD', KEYS[2], due, payload)
local level, group = payload_level(payload, true)
if level ~= PLAIN_LEVEL or group then redis.call('SET', KEYS[9], 1) end
if earliest[2] == nil or due < tonumber(earliest[2]) then
  redis.call('DEL', KEYS[4])
  redis.call('RPUSH', KEYS[4], due)
end
if kind ~= 'hash' and kind ~= 'none' then redis.call('DEL', entry) end
redis.call('HSET', entry, 'payload', payload, 'first', first)
redis.call('PEXPIRE', entry, due - now + 1000)
if KEYS[10] then
  redis.call('SET', KEYS[10], cmsgpack.pack({state = 'delayed', due = due}), 'PX', ARGV[5])
end
local cap = marked_cap(KEYS[6])
if cap then task_event(KEYS[7], cap, 'dispatched', payload) end
return {outcome, id, due}
