-- batch_member.lua: count members' outcomes, each once, and say which callbacks are due.
-- KEYS[1] state hash   KEYS[2] succeeded bitmap   KEYS[3] failed bitmap
-- KEYS[4] skipped bitmap   KEYS[5] failed-ids set   KEYS[6] adds hash   KEYS[7] queues set
-- ARGV[1] the members of this batch to count, in order, as one msgpack array of
-- [index, outcome, task id]: outcome 's' succeeded, 'f' failed for good or 'k' skipped
-- (the batch was cancelled). A worker counts the members that succeeded since its
-- last reserve call in one call (member_counts.py), any other outcome alone. One
-- argument, not three per member: a hundred members' arguments cost the worker more
-- to encode than the rest of their count.
-- Returns {-1} if there is no such batch (expired, pruned); else {1, cancelled (0/1),
-- callbacks or '', counted, then six per member that has callbacks due: its index, the
-- succeeded, failed, skipped and total counts right after it, and the names due,
-- joined by ','}. counted holds one character per member, in order: '1' counted now,
-- '0' counted before (a member run twice), '-' not a member (the index is not one).
-- Names due: 'then', 'catch', 'finally', 'progress'; callbacks is sent only if any are.
-- Invariant: counts change only with a member's bit, so a member that runs twice, or is
-- retried, is counted once. A retried member that succeeds moves from failed to
-- succeeded. Each of then, catch and finally is due in one call only, the one whose
-- member made it due; a re-run of that same member (its worker died before the ack)
-- sees it due again, and the caller's push is idempotent (push_once.lua): so each
-- callback is queued exactly once. The batch expires keep_ms after it finished.
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local fields = redis.call('HMGET', KEYS[1], 'total', 'allow_failures', 'keep_ms', 'progress')
local total = tonumber(fields[1])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function count(index, outcome, task_id)
  local s = redis.call('GETBIT', KEYS[2], index)
  local f = redis.call('GETBIT', KEYS[3], index)
  local k = redis.call('GETBIT', KEYS[4], index)
  local changed = false
  if outcome == 's' and s == 0 then
    redis.call('SETBIT', KEYS[2], index, 1)
    redis.call('HINCRBY', KEYS[1], 'succeeded', 1)
    if f == 1 then
      redis.call('SETBIT', KEYS[3], index, 0)
      redis.call('HINCRBY', KEYS[1], 'failed', -1)
      redis.call('SREM', KEYS[5], task_id)
    end
    if k == 1 then
      redis.call('SETBIT', KEYS[4], index, 0)
      redis.call('HINCRBY', KEYS[1], 'skipped', -1)
    end
    changed = true
  elseif outcome == 'f' and s == 0 and f == 0 then
    redis.call('SETBIT', KEYS[3], index, 1)
    redis.call('HINCRBY', KEYS[1], 'failed', 1)
    redis.call('SADD', KEYS[5], task_id)
    if k == 1 then
      redis.call('SETBIT', KEYS[4], index, 0)
      redis.call('HINCRBY', KEYS[1], 'skipped', -1)
    end
    changed = true
  elseif outcome == 'k' and s == 0 and f == 0 and k == 0 then
    redis.call('SETBIT', KEYS[4], index, 1)
    redis.call('HINCRBY', KEYS[1], 'skipped', 1)
    changed = true
  end
  local counts = redis.call('HMGET', KEYS[1], 'succeeded', 'failed', 'skipped')
  local succeeded, failed, skipped = tonumber(counts[1]), tonumber(counts[2]), tonumber(counts[3])
  local due = {}
  local function trigger(name, condition)
    local by = name .. '_by'
    if changed and condition and redis.call('HSETNX', KEYS[1], by, index) == 1 then
      due[#due + 1] = name
      return true
    end
    if not changed and redis.call('HGET', KEYS[1], by) == tostring(index) then
      due[#due + 1] = name
    end
    return false
  end
  if trigger('catch', outcome == 'f' and failed > 0) and fields[2] ~= '1' then
    redis.call('HSETNX', KEYS[1], 'cancelled_at', now)
  end
  trigger('then', succeeded == total)
  trigger('finally', succeeded + failed + skipped == total)
  -- Finished whenever nothing is pending, again after a retry (batch_retry.lua); a
  -- change to a finished batch (a member retried from the failed list) may create a
  -- key, so every key's expiry is set again then too.
  if succeeded + failed + skipped == total then
    if redis.call('HSETNX', KEYS[1], 'finished_at', now) == 1 or changed then
      for i = 1, 7 do redis.call('PEXPIRE', KEYS[i], tonumber(fields[3])) end
    end
  end
  if outcome == 's' and fields[4] == '1' then due[#due + 1] = 'progress' end
  return changed, due, {succeeded, failed, skipped}
end

local counted, found = {}, {}
for _, member in ipairs(cmsgpack.unpack(ARGV[1])) do
  local index = tonumber(member[1])
  if index == nil or index < 0 or index >= total or index ~= math.floor(index) then
    counted[#counted + 1] = '-'
  else
    local changed, due, counts = count(index, member[2], member[3])
    counted[#counted + 1] = changed and '1' or '0'
    if #due > 0 then
      for _, value in ipairs({index, counts[1], counts[2], counts[3], total}) do
        found[#found + 1] = value
      end
      found[#found + 1] = table.concat(due, ',')
    end
  end
end
local reply = {1, redis.call('HEXISTS', KEYS[1], 'cancelled_at'), '', table.concat(counted)}
if #found > 0 then reply[3] = redis.call('HGET', KEYS[1], 'callbacks') or '' end
for _, value in ipairs(found) do reply[#reply + 1] = value end
return reply
