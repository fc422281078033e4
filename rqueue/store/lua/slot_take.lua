-- slot_take.lua: take one of a key's N slots for a run (Concurrency), or park the call.
-- KEYS[1] the key's slots: a zset, token -> when the slot expires (ms)
-- KEYS[2] the key's waiters: a zset of parked payloads, first parked first
-- KEYS[3] reserved zset   KEYS[4] delayed zset   KEYS[5] timer list
-- KEYS[6] pending-ids set   KEYS[7] cancelling hash
-- ARGV[1] the run's token (task id and attempt)   ARGV[2] the limit N
-- ARGV[3] ms a slot lasts at most   ARGV[4] the run's reserved payload, or '': do not park
-- Returns {0, 0}: this run holds a slot now. {1, ms}: no slot; the call was moved from
-- reserved to the delayed set, its attempt given back, due when the earliest slot
-- expires (ms from now), and listed as a waiter, which slot_free.lua wakes at once.
-- {2, ms}: no slot and not parked (no payload, its cancel was requested, or it is no
-- longer reserved): the caller releases it as any middleware does (release.lua).
-- Invariant: a slot always expires, so a holder killed with SIGKILL frees it in time,
-- and a parked call is always due by then: nothing waits for a slot that nobody frees.
-- @header
local slots, token, limit = KEYS[1], ARGV[1], tonumber(ARGV[2])
local lasting, payload = tonumber(ARGV[3]), ARGV[4]
-- parked(): the payload as it waits, its attempt given back (as release.lua gives it)
local function parked()
  local attempts_at = header_at(payload)
  local attempts = struct.unpack('>I4', payload, attempts_at)
  if attempts > 0 then return with_attempts(payload, attempts_at, attempts - 1) end
  return payload
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
if redis.call('ZSCORE', slots, token) or redis.call('ZCARD', slots) < limit then
  redis.call('ZADD', slots, now + lasting, token)
  if redis.call('PTTL', slots) < lasting then redis.call('PEXPIRE', slots, lasting) end
  -- a call its own timer woke leaves the line as it starts
  if header_at(payload) then redis.call('ZREM', KEYS[2], parked()) end
  return {0, 0}
end
local wait = math.max(tonumber(redis.call('ZRANGE', slots, 0, 0, 'WITHSCORES')[2]) - now, 1)
local id = payload_id(payload)
if not id or redis.call('HEXISTS', KEYS[7], id) == 1 then return {2, wait} end
if redis.call('ZREM', KEYS[3], payload) == 0 then return {2, wait} end
payload = parked()
redis.call('SADD', KEYS[6], id)
local due = now + wait
redis.call('ZADD', KEYS[4], due, payload)
local earliest = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if tonumber(earliest[2]) >= due then
  redis.call('DEL', KEYS[5])
  redis.call('RPUSH', KEYS[5], due)
end
-- NX: a call parked again (woken, then beaten to the slot) keeps its place in line.
redis.call('ZADD', KEYS[2], 'NX', now, payload)
if redis.call('PTTL', KEYS[2]) < wait then redis.call('PEXPIRE', KEYS[2], wait) end
return {1, wait}
