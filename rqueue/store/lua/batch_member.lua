-- batch_member.lua: count members' outcomes, each once, and say which callbacks are due.
-- KEYS[1] state hash   KEYS[2] succeeded bitmap   KEYS[3] failed bitmap
-- KEYS[4] skipped bitmap   KEYS[5] failed-ids set   KEYS[6] adds hash   KEYS[7] queues set
-- KEYS[8] results hash (member index -> its packed return value)
-- ARGV[1] the members of this batch to count, in order, as one flat msgpack array of
-- four per member: index, outcome, task id, value. Outcome 's' succeeded, 'f' failed
-- for good or 'k' skipped (the batch was cancelled); value, the member's packed return
-- value, sent by a member whose batch has a callback that gets the results, else false.
-- A worker counts the members that succeeded since its last reserve call in one call
-- (member_counts.py), any other outcome alone. One argument, not four per member: a
-- hundred members' arguments cost the worker more to encode than the rest of their
-- count; flat, not an array per member: unpacking a table per member took more of
-- Redis's time than counting them.
-- ARGV[2] the most bytes the batch's values may take together
-- (RQUEUE_MAX_BATCH_RESULTS_BYTES)
-- Returns {-1} if there is no such batch (expired, pruned); else {1, cancelled (0/1),
-- callbacks or '', counted, then six per member that has callbacks due: its index, the
-- succeeded, failed, skipped and total counts right after it, and the names due,
-- joined by ','}. counted holds one character per member, in order: '1' counted now,
-- '0' counted before (a member run twice), '-' not a member (the index is not one),
-- 'x' a success whose value would take the batch's values over ARGV[2]: counted as
-- failed instead (if it was not already), and its worker fails it for good.
-- Names due: 'then', 'catch', 'finally', 'progress'; callbacks is sent only if any are.
-- Invariant: counts change only with a member's bit, so a member that runs twice, or is
-- retried, is counted once. A retried member that succeeds moves from failed to
-- succeeded. Each of then, catch and finally is due in one call only, the one whose
-- member made it due; a re-run of that same member (its worker died before the ack)
-- sees it due again, and the caller's push is idempotent (push_once.lua): so each
-- callback is queued exactly once. A value is stored with its member's success bit
-- only: a member counted before never overwrites its own, and the running total
-- ('results_bytes') holds each stored value once, never over ARGV[2]. The batch expires
-- keep_ms after it finished, every key with it.
-- Cost: the counts are read once and written once per call, kept in locals between
-- (the script is atomic, so they stay exact); a success without a value is one SETBIT
-- (its old bit says whether it was counted before), and a member's failed and skipped
-- bits are read only while some member is counted so (a count is its bits' sum). The
-- index goes to each command as the text it is formatted to once ('at'): Lua's own
-- conversion of a number in every redis.call costs more than the SETBIT, and a member
-- that makes nothing due makes no table.
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local COUNTS = {'succeeded', 'failed', 'skipped'}
local fields = redis.call('HMGET', KEYS[1], 'total', 'allow_failures', 'keep_ms', 'progress',
  unpack(COUNTS))
local total = tonumber(fields[1])
local counted_before = {}
for i = 1, #COUNTS do
  local value = tonumber(fields[4 + i] or '0')
  if value == nil or value ~= math.floor(value) then
    return redis.error_reply('ERR the batch counts are not integers')
  end
  counted_before[i] = value
end
local succeeded, failed, skipped = unpack(counted_before)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local most_bytes, held = tonumber(ARGV[2]), nil

-- Whether a success's value (if it sent one) fits beside the values kept; if so, kept.
-- Their total is read once per call, and written once at its end.
local function kept(at, value)
  if type(value) ~= 'string' then return true end
  held = held or tonumber(redis.call('HGET', KEYS[1], 'results_bytes') or '0')
  if held + #value > most_bytes then return false end
  redis.call('HSET', KEYS[8], at, value)
  held = held + #value
  return true
end

-- Whether callback ``name`` is due at member ``at``: made due now if ``changed`` and
-- ``condition`` (its ``<name>_by`` field set once, by whichever member gets there first),
-- or found due again for the member that made it due (a re-run, not changed).
local BY = {catch = 'catch_by', ['then'] = 'then_by', finally = 'finally_by'}
local function due_at(name, at, changed, condition)
  if changed then
    return condition and redis.call('HSETNX', KEYS[1], BY[name], at) == 1
  end
  return redis.call('HGET', KEYS[1], BY[name]) == at
end

-- Count one member; whether it changed a count, whether its value was over the bound,
-- and the names of the callbacks it made due (nil: none, the common case, so no table
-- is made for it).
local function count(at, outcome, task_id, value)
  -- A success without a value is counted by setting its bit at once (its old bit says
  -- whether it was counted before); one with a value only once the value is kept.
  local set_at_once = outcome == 's' and type(value) ~= 'string'
  local s = set_at_once and redis.call('SETBIT', KEYS[2], at, '1')
    or redis.call('GETBIT', KEYS[2], at)
  local f = (s == 0 and failed > 0) and redis.call('GETBIT', KEYS[3], at) or 0
  local k = (s == 0 and skipped > 0) and redis.call('GETBIT', KEYS[4], at) or 0
  local changed, over = false, false
  if outcome == 's' and s == 0 and not kept(at, value) then
    outcome, over = 'f', true
  end
  if outcome == 's' and s == 0 then
    if not set_at_once then redis.call('SETBIT', KEYS[2], at, '1') end
    succeeded = succeeded + 1
    if f == 1 then
      redis.call('SETBIT', KEYS[3], at, '0')
      failed = failed - 1
      redis.call('SREM', KEYS[5], task_id)
    end
    if k == 1 then
      redis.call('SETBIT', KEYS[4], at, '0')
      skipped = skipped - 1
    end
    changed = true
  elseif outcome == 'f' and s == 0 and f == 0 then
    redis.call('SETBIT', KEYS[3], at, '1')
    failed = failed + 1
    redis.call('SADD', KEYS[5], task_id)
    if k == 1 then
      redis.call('SETBIT', KEYS[4], at, '0')
      skipped = skipped - 1
    end
    changed = true
  elseif outcome == 'k' and s == 0 and f == 0 and k == 0 then
    redis.call('SETBIT', KEYS[4], at, '1')
    skipped = skipped + 1
    changed = true
  end
  local due = nil
  if due_at('catch', at, changed, outcome == 'f' and failed > 0) then
    due = {'catch'}
    if changed and fields[2] ~= '1' then redis.call('HSETNX', KEYS[1], 'cancelled_at', now) end
  end
  if due_at('then', at, changed, succeeded == total) then
    due = due or {}
    due[#due + 1] = 'then'
  end
  local finished = succeeded + failed + skipped == total
  if due_at('finally', at, changed, finished) then
    due = due or {}
    due[#due + 1] = 'finally'
  end
  -- Finished whenever nothing is pending, again after a retry (batch_retry.lua); a
  -- change to a finished batch (a member retried from the failed list) may create a
  -- key, so every key's expiry is set again then too.
  if finished then
    if redis.call('HSETNX', KEYS[1], 'finished_at', now) == 1 or changed then
      for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], tonumber(fields[3])) end
    end
  end
  if outcome == 's' and fields[4] == '1' then
    due = due or {}
    due[#due + 1] = 'progress'
  end
  return changed, over, due
end

local counted, found = {}, {}
local members = cmsgpack.unpack(ARGV[1])
for first = 1, #members, 4 do
  local index = tonumber(members[first])
  if index == nil or index < 0 or index >= total or index % 1 ~= 0 then
    counted[#counted + 1] = '-'
  else
    local at = string.format('%d', index)
    local changed, over, due = count(at, unpack(members, first + 1, first + 3))
    counted[#counted + 1] = over and 'x' or (changed and '1' or '0')
    if due then
      found[#found + 1] = index
      found[#found + 1] = succeeded
      found[#found + 1] = failed
      found[#found + 1] = skipped
      found[#found + 1] = total
      found[#found + 1] = table.concat(due, ',')
    end
  end
end
if held then redis.call('HSET', KEYS[1], 'results_bytes', held) end
for i, counted_now in ipairs({succeeded, failed, skipped}) do
  if counted_now ~= counted_before[i] then
    redis.call('HINCRBY', KEYS[1], COUNTS[i], counted_now - counted_before[i])
  end
end
local reply = {1, redis.call('HEXISTS', KEYS[1], 'cancelled_at'), '', table.concat(counted)}
if #found > 0 then reply[3] = redis.call('HGET', KEYS[1], 'callbacks') or '' end
for _, value in ipairs(found) do reply[#reply + 1] = value end
return reply
