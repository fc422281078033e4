-- resolve.lua: one outcome of a task that others wait for, applied to one waiting task.
-- KEYS[1] the queue's waiting hash   KEYS[2] ready list   KEYS[3] notify list
-- KEYS[4] pending-ids set   KEYS[5] cancelled set   KEYS[6] failed list
-- KEYS[7] failed lookup (failed_list.lua)   KEYS[8..13] the waiting task's six kept-result
-- keys (keep_result.lua: result key, done list, finished index, its dependents set, the
-- queue's resolved and timer lists)   KEYS[14..27] the queue's priority keys (levels.lua):
-- a task that carries a level goes to that level's list (read from its payload)
-- ARGV[1] the task's id (32 hex characters)   ARGV[2] its 16 raw bytes
-- ARGV[3] 'mark': ARGV[4] the index of the task that finished among those it waits for
--   (from 0), ARGV[5] its outcome's mark ('s' succeeded, 'f' failed, 'c' cancelled).
--   Sets the mark if that place is still '-'; once none is, pushes the task to its
--   ready list (a `pending` status record for ARGV[6] ms if it keeps one). A mark that
--   fails it (not 's', and its state does not begin with 'a': allow failures) or a
--   state that does not read changes nothing: the reply hands it to the caller, which
--   builds the failure and calls 'fail'.
-- ARGV[3] 'fail' or 'drop', if the state is still ARGV[4] (compare and set): 'fail'
--   files ARGV[5] in the failed list and, if ARGV[6] is not empty, keeps that result
--   record for ARGV[7] ms; 'drop' (a dispatch refused) deletes its status record.
-- Returns 1 if done, 0 if the task no longer waits (or this mark was set before),
-- -1 if its state is no longer ARGV[4], 2 if it was cancelled while it waited (it
-- leaves the hash now: its record says cancelled already), {payload, state} if the
-- caller must fail it.
-- Invariant: a waiting task leaves the hash once, into exactly one of ready, failed or
-- nothing (cancelled, dropped); each mark is set once, so an outcome applied twice
-- (a notice whose parent died before removing it) changes nothing the second time.
-- @failed_list
-- @header
-- @levels
-- @dependents
-- @keep_result
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return 0 end
local payload_field, state_field = 'p:' .. ARGV[1], 's:' .. ARGV[1]
local payload = redis.call('HGET', KEYS[1], payload_field)
if not payload then return 0 end
local state = redis.call('HGET', KEYS[1], state_field) or ''
local function leave()
  redis.call('HDEL', KEYS[1], payload_field, state_field)
end
if redis.call('SREM', KEYS[5], ARGV[2]) == 1 then
  leave()
  return 2
end
local action = ARGV[3]
if action == 'mark' then
  if not string.match(state, '^[an][%-sfc]+$') then return {payload, state} end
  local at = tonumber(ARGV[4]) + 2
  if at > #state or string.sub(state, at, at) ~= '-' then return 0 end
  if ARGV[5] ~= 's' and string.sub(state, 1, 1) ~= 'a' then return {payload, state} end
  local marked = string.sub(state, 1, at - 1) .. ARGV[5] .. string.sub(state, at + 1)
  if string.find(marked, '-', 2, true) then
    redis.call('HSET', KEYS[1], state_field, marked)
    return 1
  end
  leave()
  local level, group = payload_level(payload, true)
  to_level(14, level, payload, false, group)
  if level ~= PLAIN_LEVEL or group then redis.call('SET', KEYS[25], 1) end
  if redis.call('LLEN', KEYS[3]) == 0 then redis.call('RPUSH', KEYS[3], 1) end
  if redis.call('PTTL', KEYS[8]) > 0 then
    local time = redis.call('TIME')
    local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    redis.call('SET', KEYS[8], cmsgpack.pack({state = 'pending', due = now}), 'PX', ARGV[6])
  end
  return 1
end
if state ~= ARGV[4] then return -1 end
leave()
redis.call('SREM', KEYS[4], ARGV[2])
if action == 'drop' then
  redis.call('DEL', KEYS[8])
  return 1
end
reindex(KEYS[6], KEYS[7])
redis.call('LPUSH', KEYS[6], ARGV[5])
redis.call('ZADD', KEYS[7], next_sequence(KEYS[7]), free_member(KEYS[7], ARGV[5]))
if ARGV[6] ~= '' then keep_result(8, ARGV[6], ARGV[7], payload) end
return 1
