-- migrate.lua: move due delayed tasks and expired reservations back to the ready list.
-- KEYS[1] delayed zset   KEYS[2] reserved zset   KEYS[3] ready list   KEYS[4] notify list
-- KEYS[5] the queue's events marker   KEYS[6] its event stream
-- KEYS[7] its resolved list: how many notices wait there (dependents.lua) is returned,
-- so the parent applies them on this tick, at no round trip of its own
-- KEYS[8..21] the queue's priority levels (levels.lua): if the queue has had
-- prioritised tasks (one EXISTS), each task moved goes to the end of its own level's
-- list, read from its payload; else all go to the ready list (level 5) as one RPUSH
-- ARGV[1] how many tasks at most to move from each set in this call
-- ARGV[2] the event stream's cap (rqueue work --events); 0: none. A worker parent
-- recording events calls this every tick: the marker, holding the cap, is set to last
-- 30 s (producers' scripts add their events while it exists, see push.lua), and the
-- stream to last a day after the last such tick.
-- ARGV[3] aging in ms (rqueue work --aging), 0: none. With levels in use, a level
-- whose oldest task is still the same one this long after a call first saw it there
-- (it was not taken: higher levels kept the workers busy) has that task moved to the
-- front of the highest level with tasks, so it runs next; the next one starts its own
-- wait. Each call records the heads it saw (aging hash: `id:<level>`, `at:<level>`,
-- Redis's clock), so a waiting level gets a task run at least once per aging period.
-- Returns {moved, next_due_ms (-1 if nothing is waiting), now_ms, notices}
-- Invariant: a task leaves delayed or reserved only into ready, in due order. An
-- expired reservation keeps its counted attempt, so a task whose worker died uses
-- one up; but one its worker never confirmed (its score ends in .5: reserve.lua's
-- ARGV[9]) gets it back, since its task never started. Bounded per call so one big
-- backlog never blocks Redis for long.
-- @header
-- @levels
local cap = tonumber(ARGV[2])
if cap > 0 then
  redis.call('SET', KEYS[5], cap, 'PX', 30000)
  if redis.call('EXISTS', KEYS[6]) == 1 then redis.call('PEXPIRE', KEYS[6], 86400000) end
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local limit = tonumber(ARGV[1])
local moved = 0
local used = redis.call('EXISTS', KEYS[19]) == 1
-- expired(): the reservations run out by now, each unconfirmed one's attempt given back.
local function expired()
  local found = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  local due = {}
  for i = 1, #found, 2 do
    local payload, score = found[i], tonumber(found[i + 1])
    if score ~= math.floor(score) then payload = attempt_returned(payload) end
    due[#due + 1] = payload
  end
  return due
end
for _, key in ipairs({KEYS[1], KEYS[2]}) do
  local due
  if key == KEYS[2] then
    due = expired()
  else
    due = redis.call('ZRANGEBYSCORE', key, '-inf', now, 'LIMIT', 0, limit)
  end
  if #due > 0 then
    redis.call('ZREMRANGEBYRANK', key, 0, #due - 1)
    if used then
      for _, payload in ipairs(due) do
        local level, group = payload_level(payload, true)
        to_level(8, level, payload, false, group)
      end
    else
      redis.call('RPUSH', KEYS[3], unpack(due))
    end
    moved = moved + #due
  end
end
if moved > 0 and redis.call('LLEN', KEYS[4]) == 0 then
  redis.call('RPUSH', KEYS[4], 1)
end
local aging = tonumber(ARGV[3] or 0)
if aging > 0 and used then
  local waiting = {}  -- the levels with tasks, highest first
  for level = 0, 9 do
    if redis.call('LLEN', KEYS[8 + level]) > 0 then waiting[#waiting + 1] = level end
  end
  for i, level in ipairs(waiting) do
    local head = payload_id(redis.call('LINDEX', KEYS[8 + level], 0)) or ''
    local seen = redis.call('HMGET', KEYS[20], 'id:' .. level, 'at:' .. level)
    if i == 1 then
      redis.call('HDEL', KEYS[20], 'id:' .. level, 'at:' .. level)
    elseif seen[1] == head and now - tonumber(seen[2] or now) >= aging then
      redis.call('LPUSH', KEYS[8 + waiting[1]], redis.call('LPOP', KEYS[8 + level]))
      redis.call('HDEL', KEYS[20], 'id:' .. level, 'at:' .. level)
      moved = moved + 1
    elseif seen[1] ~= head then
      redis.call('HSET', KEYS[20], 'id:' .. level, head, 'at:' .. level, now)
    end
  end
  if #waiting < 2 then redis.call('DEL', KEYS[20]) end
  if moved > 0 and redis.call('LLEN', KEYS[4]) == 0 then redis.call('RPUSH', KEYS[4], 1) end
end
local next_due = -1
for _, key in ipairs({KEYS[1], KEYS[2]}) do
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] ~= nil then
    local score = tonumber(first[2])
    if next_due < 0 or score < next_due then next_due = score end
  end
end
return {moved, next_due, now, redis.call('LLEN', KEYS[7])}
