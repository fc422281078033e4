-- release.lua: give reserved tasks back, now or after a backoff.
-- KEYS[1] reserved zset   KEYS[2] delayed zset   KEYS[3] ready list
-- KEYS[4] notify list     KEYS[5] timer list
-- KEYS[6] pending-ids set: a task given back is pending again, so it can be cancelled
--         (cancel.lua) and its status reads "pending" rather than "running"
-- KEYS[7] the queue's event stream: "retried" for each task moved, if ARGV[4] names
--         an error and ARGV[3] is not 0 (see events.lua)
-- KEYS[8] the queue's cancelling hash (cancel.lua)   KEYS[9] its cancelled set: a task
--         whose cancel was requested while it was reserved is not put back for another
--         run. One that ran (a retry, its own release) stays reserved for its worker to
--         settle as cancelled (settle_cancelled.lua); one that never started goes back
--         cancelled, as if cancelled while pending (reserve.lua drops it)
-- KEYS[10..23] the queue's priority levels (levels.lua): a task released without a
--         delay goes back to its own level's list, read from its payload if the queue
--         has had prioritised tasks (one EXISTS); with a delay it goes to delayed, and
--         migrate.lua puts it on its level when due
-- KEYS[24] (optional) a child's claims key (reserve.lua), deleted: what a child gives
--         back must not be given back again from there once another worker has it
-- ARGV[1] delay in ms (0: ready at once)
-- ARGV[2] '1' if the tasks never started (prefetched, or a worker stopping): their
--         attempt is given back and they go to the front of the list, in order
-- ARGV[3] the event stream's cap; 0: no events
-- ARGV[4] the error type of the failed attempt that is retried, or '': not a retry (a
--         release by middleware, tasks given back unstarted), no event
-- ARGV[5..] reserved payloads, the exact bytes reserve.lua returned
-- Returns how many tasks were moved, or -1 if a task that ran was kept reserved because
-- its cancel was requested (a retry, or a task's own release, passes one task).
-- Invariant: only tasks still reserved move, so a task whose reservation already
-- expired and was handed to another worker is never duplicated by a late release.
-- @header
-- @levels
-- @events
if KEYS[24] then redis.call('DEL', KEYS[24]) end
local cap, error_type = tonumber(ARGV[3]), ARGV[4]
local retried = cap > 0 and error_type ~= ''
local delay = tonumber(ARGV[1])
local unstarted = ARGV[2] == '1'
local time = redis.call('TIME')
local due = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + delay
local moved, held = 0, 0
local used = delay <= 0 and redis.call('EXISTS', KEYS[21]) == 1
local requests = redis.call('HLEN', KEYS[8]) > 0
local first, last, step = 5, #ARGV, 1
if unstarted then first, last, step = #ARGV, 5, -1 end
for i = first, last, step do
  local payload = ARGV[i]
  local id = requests and payload_id(payload)
  local cancelled = id and redis.call('HEXISTS', KEYS[8], id) == 1
  if cancelled and not unstarted then
    if redis.call('ZSCORE', KEYS[1], payload) then held = held + 1 end
  elseif redis.call('ZREM', KEYS[1], payload) == 1 then
    moved = moved + 1
    if retried then task_event(KEYS[7], cap, 'retried', payload, 'error', error_type) end
    local attempts_at, _, id_at, id_length = header_at(payload)
    if cancelled then
      redis.call('HDEL', KEYS[8], id)
      redis.call('SADD', KEYS[9], id)
    elseif attempts_at then
      redis.call('SADD', KEYS[6], string.sub(payload, id_at, id_at + id_length - 1))
    end
    if unstarted then payload = attempt_returned(payload) end
    if delay > 0 then
      redis.call('ZADD', KEYS[2], due, payload)
    else
      local level, group = payload_level(payload, used)
      to_level(10, level, payload, unstarted, group)
    end
  end
end
if moved > 0 then
  if delay > 0 then
    local earliest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    if tonumber(earliest[2]) >= due then
      redis.call('DEL', KEYS[5])
      redis.call('RPUSH', KEYS[5], due)
    end
  elseif redis.call('LLEN', KEYS[4]) == 0 then
    redis.call('RPUSH', KEYS[4], 1)
  end
end
if held > 0 then return -1 end
return moved
