-- push_once.lua: push one task unless a task with its id was pushed this way before,
-- and, in the same step, acknowledge the task whose completion pushes it.
-- What a workflow pushes on a task's completion (a chain's next step, a batch's
-- callback) has an id derived from the completing task, and the completing task may
-- run twice (its worker died before the ack). So the push is guarded by a marker
-- beside the queue: the second run finds it and pushes nothing.
-- KEYS[1..7] as push.lua (ready, delayed, notify, timer, pending-ids, events marker,
-- event stream: a "dispatched" event while a worker records events there)
-- KEYS[8] the marker key of the task's id
-- KEYS[9] its result key, if ARGV[4] is '1': it gets a status record, as in push.lua
-- then, if ARGV[5] is not empty: the completing task's reserved zset, and if ARGV[6]
-- is not empty its six kept-result keys (a chain's step, acked as
-- ack.lua does, keep_result.lua; on Redis Cluster only when both tasks' queues share a
-- slot), and last the completing task's event stream, for its "succeeded" event when
-- ARGV[9] is not 0
-- and always last, the queue's 14 priority keys (levels.lua): a payload that carries a
-- level other than 5 goes to that level's list (read from it: workflows' pushes only)
-- ARGV[1] delay in ms   ARGV[2] how long the marker (and a status record) lasts, in ms
-- ARGV[3] the payload   ARGV[4] '1' if the task keeps its result
-- ARGV[5] the completing task's reserved payload, or ''   ARGV[6] its result record,
-- or ''   ARGV[7] milliseconds to keep that record   ARGV[8] '1' to push it at the head
-- of the ready list, next to be reserved (a batch's callback, due as a member
-- finished: it runs then, not behind every member still queued); else at the tail
-- ARGV[9] the completing task's event stream's cap (the worker's); 0: no event
-- Returns 1 if pushed, 0 if it had been pushed before.
-- Invariant: for one id, at most one push while the marker lasts; the completing
-- task leaves its queue in the same step its successor enters one, however often
-- this runs.
-- @header
-- @levels
-- @dependents
-- @keep_result
-- @events
-- dispatched(): its "dispatched" event, once it is in, while a worker records events
local function dispatched()
  local cap = marked_cap(KEYS[6])
  if cap then task_event(KEYS[7], cap, 'dispatched', ARGV[3]) end
end
local levels_at = #KEYS - 13  -- the level 0 list: see levels.lua
local after = 8
if ARGV[4] == '1' then after = 9 end
if ARGV[5] ~= '' then
  redis.call('ZREM', KEYS[after + 1], ARGV[5])
  local cap = tonumber(ARGV[9])
  if cap > 0 then task_event(KEYS[levels_at - 1], cap, 'succeeded', ARGV[5]) end
  if ARGV[6] ~= '' then
    keep_result(after + 2, ARGV[6], ARGV[7], ARGV[5])
  end
end
if redis.call('SET', KEYS[8], 1, 'NX', 'PX', ARGV[2]) == false then return 0 end
local id = payload_id(ARGV[3])
if id then redis.call('SADD', KEYS[5], id) end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local delay = tonumber(ARGV[1])
if ARGV[4] == '1' then
  local state = 'pending'
  if delay > 0 then state = 'delayed' end
  redis.call('SET', KEYS[9], cmsgpack.pack({state = state, due = now + delay}), 'PX', ARGV[2])
end
local level, group = payload_level(ARGV[3], true)
if level ~= PLAIN_LEVEL or group then redis.call('SET', KEYS[levels_at + 11], 1) end
if delay <= 0 then
  to_level(levels_at, level, ARGV[3], ARGV[8] == '1', group)
  if redis.call('LLEN', KEYS[3]) == 0 then redis.call('RPUSH', KEYS[3], 1) end
  dispatched()
  return 1
end
local due = now + delay
local earliest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
redis.call('ZADD', KEYS[2], due, ARGV[3])
if earliest[2] == nil or due < tonumber(earliest[2]) then
  redis.call('DEL', KEYS[4])
  redis.call('RPUSH', KEYS[4], due)
end
dispatched()
return 1
