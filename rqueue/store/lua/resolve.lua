-- resolve.lua: one outcome of a task that others wait for, applied to one waiting task
-- (workflows/dependencies.py decides what it does from the state it read).
-- KEYS[1] the queue's waiting hash   KEYS[2] ready list   KEYS[3] notify list
-- KEYS[4] pending-ids set   KEYS[5] cancelled set   KEYS[6] failed list
-- KEYS[7] failed lookup (failed_list.lua)   KEYS[8..13] the waiting task's six kept-result
-- keys (keep_result.lua: result key, done list, finished index, its dependents set, the
-- queue's resolved and timer lists)
-- ARGV[1] the task's id (32 hex characters)   ARGV[2] its 16 raw bytes   ARGV[3] the
-- state read (compare and set)   ARGV[4] what to do: 'wait' (store ARGV[5] as its
-- state), 'run' (push it to the ready list), 'fail' (file ARGV[6] in the failed list and,
-- if ARGV[7] is not empty, keep that result record for ARGV[8] ms) or 'drop' (a dispatch
-- refused: its status record goes too); a task cancelled while it waited (its id in the
-- cancelled set, cancel.lua) is dropped whatever ARGV[4] says
-- ARGV[5] the new state   ARGV[9] how long a `pending` status record lasts (ms)
-- Returns 1 if done, 0 if the task no longer waits (run, failed, dropped or cleared
-- before), -1 if its state is no longer ARGV[3] (read it again), 2 if it was cancelled
-- while it waited (dropped now: its record says cancelled already).
-- Invariant: a waiting task leaves the hash once, into exactly one of ready, failed or
-- nothing (cancelled, dropped); each outcome is applied once, since the state read
-- carries one mark per task waited for and changes only by compare and set.
-- @failed_list
-- @header
-- @dependents
-- @keep_result
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return 0 end
local payload = redis.call('HGET', KEYS[1], 'p:' .. ARGV[1])
if not payload then return 0 end
if (redis.call('HGET', KEYS[1], 's:' .. ARGV[1]) or '') ~= ARGV[3] then return -1 end
local action = ARGV[4]
if redis.call('SREM', KEYS[5], ARGV[2]) == 1 then action = 'cancelled' end
if action == 'wait' then
  redis.call('HSET', KEYS[1], 's:' .. ARGV[1], ARGV[5])
  return 1
end
redis.call('HDEL', KEYS[1], 'p:' .. ARGV[1], 's:' .. ARGV[1])
if action == 'cancelled' then return 2 end
if action == 'run' then
  redis.call('RPUSH', KEYS[2], payload)
  if redis.call('LLEN', KEYS[3]) == 0 then redis.call('RPUSH', KEYS[3], 1) end
  if redis.call('PTTL', KEYS[8]) > 0 then
    redis.call('SET', KEYS[8], cmsgpack.pack({state = 'pending', due = 0}), 'PX', ARGV[9])
  end
  return 1
end
redis.call('SREM', KEYS[4], ARGV[2])
if action == 'drop' then redis.call('DEL', KEYS[8]) end
if action == 'fail' then
  reindex(KEYS[6], KEYS[7])
  redis.call('LPUSH', KEYS[6], ARGV[6])
  redis.call('ZADD', KEYS[7], next_sequence(KEYS[7]), free_member(KEYS[7], ARGV[6]))
  if ARGV[7] ~= '' then keep_result(8, ARGV[7], ARGV[8], payload) end
end
return 1
