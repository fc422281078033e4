-- breaker.lua: a circuit breaker over a task's exceptions (ThrottlesExceptions).
-- Closed: runs go ahead and exceptions are counted, in a window of `decay` ms from the
-- first. At `max` exceptions it opens for `decay` ms: no run starts. Then it is
-- half-open: one run (the trial) goes ahead; its success closes the breaker, its
-- exception opens it again. A trial that never reports (its worker lost) is replaced
-- after `trial` ms.
-- KEYS[1] hash: failures, open_until (ms), trial (a run's token), trial_until (ms)
-- ARGV[1] 'check', 'success', 'failure' or 'state'   ARGV[2] the run's token
-- ARGV[3] max exceptions   ARGV[4] decay in ms   ARGV[5] trial in ms
-- Returns, for check: 0 if the run may start, else ms to wait; for state: 0 closed,
-- 1 open, 2 half-open; else the state after the report.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'open_until', 'trial', 'trial_until')
local open_until = tonumber(state[1]) or 0
local mode, token = ARGV[1], ARGV[2]
local decay, trial_ms = tonumber(ARGV[4]), tonumber(ARGV[5])
local function current()
  if open_until > now then return 1 elseif open_until > 0 then return 2 end
  return 0
end
if mode == 'state' then return current() end
if mode == 'check' then
  if open_until > now then return open_until - now end
  if open_until > 0 then
    local trial_until = tonumber(state[3]) or 0
    if state[2] and state[2] ~= token and trial_until > now then
      return math.min(trial_until - now, 1000)
    end
    redis.call('HSET', KEYS[1], 'trial', token, 'trial_until', now + trial_ms)
    redis.call('PEXPIRE', KEYS[1], decay + trial_ms)
  end
  return 0
end
if mode == 'success' then
  -- A run let in before the breaker opened does not close it; only its trial does.
  if open_until == 0 or state[2] == token then redis.call('DEL', KEYS[1]) end
  return current()
end
if open_until > now then return 1 end  -- open already: a run let in before it opened
if open_until == 0 then
  local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
  if failures == 1 then redis.call('PEXPIRE', KEYS[1], decay) end
  if failures < tonumber(ARGV[3]) then return 0 end
end
-- The limit reached, or the half-open trial failed: open for `decay` ms.
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'open_until', now + decay)
redis.call('PEXPIRE', KEYS[1], 2 * decay + trial_ms)
return 1
