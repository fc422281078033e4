-- reserve.lua: acknowledge finished tasks, then pop up to N ready tasks and
-- reserve each one, in one step (so a busy worker pays one round trip per batch).
-- KEYS[1] ready list   KEYS[2] reserved zset   KEYS[3] notify list
-- KEYS[4] pending-ids set: the popped tasks' ids leave it (one SREM per call)
-- KEYS[5] cancelled set: a popped task whose id is in it is dropped, not reserved
--         (one SCARD per call; one SREM per task only while cancellations wait)
-- KEYS[6] the queue's paused flag: while it exists nothing is reserved (rqueue pause),
--         acks still go through, and the reply says no task is ready
-- KEYS[7] the queue's event stream: "started" for each task reserved, "succeeded" for
--         each acked, when ARGV[8] is not 0 (rqueue work --events; see events.lua)
-- KEYS[8] the queue's priority levels set (levels.lua): with no level in it (one SCARD),
--         only the ready list is read, as if there were no levels
-- KEYS[9..19] (optional: present if KEYS[14] is KEYS[1] again) the lists of levels 0 to 9
--         (level 5's is the ready list), then the groups' turns (groups.lua): levels 0-4
--         are taken from before level 5, 6-9 after it, each oldest first; at level 5,
--         while groups have tasks (5 is in the levels set), the groups and the ready list
--         take turns, one task a turn. A caller that did not pass them while levels
--         are in use gets {now_ms, -1} (with a rate limit {now_ms, -1, 0}) and nothing
--         reserved, its acks done: it calls again with them (store/consumer.py), so a
--         queue without levels costs its reserve calls one key, not eleven
-- KEYS[F + 1] (optional: present if "last" below is F + 1 + 6k, F being 8, or 19 with
--         the lists) the calling child's claims key: set
--         to this call's reply as a msgpack array, expiring with the batch's longest reservation, or
--         deleted if nothing was reserved. A child may reserve its next batch while
--         it runs this one; if it dies before reading the reply, its parent finds
--         those tasks here and gives them back at once (recovery.py).
-- ARGV[1] how many tasks at most
-- ARGV[2] timeout in ms for tasks without their own
-- ARGV[3] grace in ms (the parent's kill delay after a timeout)
-- ARGV[4] margin in ms (slack for the worker to start the task and report back)
-- ARGV[5] how many workers share the queue: take at most a fair share of what is
--         ready, so a short queue is spread over idle children instead of hoarded
-- ARGV[6] the reserved payloads of tasks that completed (plain acks), as one msgpack
--         array: removed first, as ack.lua does
-- ARGV[7] k: how many kept results follow
-- ARGV[8] the event stream's cap (about how many entries it keeps); 0: no events
-- ARGV[9] 1: reserve unconfirmed, for a call sent behind a BLPOP that its worker may
--         never read (worker/reservations.py, wait_then_reserve): each reservation lasts
--         the margin alone, its score half a millisecond past it, until renew.lua
--         confirms it as the worker starts the task; one that expires unconfirmed gets
--         its attempt back (migrate.lua). 0: a plain reservation
-- ARGV[10..] k triples (reserved payload, result record, milliseconds to keep it) of tasks
-- that completed and keep their result: each is removed the same way and its record
-- written to KEYS[last-6k+6i-5] (its result key), with a token pushed to the next
-- key (its done list) that wakes whoever waits for the result, and its id added to
-- the one after (the queue's finished index), and the tasks waiting for it told by
-- the three after that (its dependents set, the queue's resolved and timer lists;
-- see ack.lua, keep_result.lua, dependents.lua)
-- then, only for a queue with a rate limit (rqueue work --rate), two more: its period
-- in ms and its limit; its state key (the queue's rate key) is then the last of KEYS,
-- after the result keys ("last" above is the key before it, else #KEYS). The limit is
-- a GCRA with no burst: the key holds the theoretical arrival time (TAT, ms) of the
-- next task, each task moves it on by period / limit, and a task may start once TAT
-- is not ahead of now; TAT lags now by one interval at most. So tasks start period /
-- limit apart over time and no window of `period` ms holds more than `limit` + 1 (a
-- burst of `limit` would let up to twice that into one).
-- Levels are strict: a task of a lower level is reserved only when no higher level
-- has one ready (rqueue work --aging promotes a waiting one, see migrate.lua).
-- Returns {now_ms, still_ready, reserved_1, reserved_2, ...}: how many tasks are left
-- in the list (a worker reserves its next batch early only from a deep queue), then
-- only the reserved bytes, which the worker acks, releases or fails by (the
-- original differs in the attempt counter only). With a rate limit, the ms until the
-- limit frees its next task (0: free now) comes third: {now_ms, still_ready, wait_ms,
-- reserved_1, ...}; the claims key holds the reply without it. The reply is that array
-- packed as msgpack, one bulk string: the worker unpacks it in C, where reading a
-- hundred bulk strings cost redis-py's parser (without hiredis) a Python step each.
-- Invariant: a popped task is in the reserved set before the script ends, its
-- attempt counter (4 bytes in its fixed header, see header.lua) one higher than in the list;
-- with a rate limit, no more tasks are reserved than it has free now.
-- Each reservation lasts margin + the task's own timeout + grace (unconfirmed: the
-- margin, see ARGV[9]). A worker runs a
-- batch one task after another; before starting a task whose reservation could run
-- out before the task's worst-case end, it renews it (renew.lua), and skips it if it
-- already went back to the queue. So no task can be handed to a second worker while
-- the first may still run it, and a dead host's tasks come back after one timeout.
-- Bytes without rqueue's header are reserved unchanged so the worker can fail them.
-- @header
-- @levels
-- @dependents
-- @keep_result
-- @events
local acks, kept, cap = cmsgpack.unpack(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local rate_at, last = 10 + 3 * kept, #KEYS
local rate = false
if ARGV[rate_at] then rate, last = KEYS[last], last - 1 end  -- no limit: this test only
if #acks > 0 then redis.call('ZREM', KEYS[2], unpack(acks)) end
local fixed = 8  -- KEYS before the claims key
if KEYS[14] == KEYS[1] then fixed = 19 end
local claims = false
if last == fixed + 1 + 6 * kept then claims = KEYS[fixed + 1] end
if cap > 0 then
  for _, acked in ipairs(acks) do task_event(KEYS[7], cap, 'succeeded', acked) end
end
if kept > 0 then
  local first_key, first_arg = last - 6 * kept, 9
  for i = 1, kept do
    local at = first_arg + 3 * (i - 1)
    keep_result(first_key + 6 * i - 5, ARGV[at + 2], ARGV[at + 3], ARGV[at + 1])
    redis.call('ZREM', KEYS[2], ARGV[at + 1])  -- once its record is written (see ack.lua)
    if cap > 0 then task_event(KEYS[7], cap, 'succeeded', ARGV[at + 1]) end
  end
end
local ready = redis.call('LLEN', KEYS[1])
local sources = false  -- with levels in use: {level, its length} pairs, in the order taken
local grouped = false  -- with groups in use: level 5 is taken by turns (groups.lua)
local leveled = redis.call('SCARD', KEYS[8]) > 0
if leveled and fixed == 8 then  -- the caller must call again, with the lists (above)
  if claims then redis.call('DEL', claims) end
  local time = redis.call('TIME')
  local asked = {tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000), -1}
  if rate then asked[3] = 0 end
  return cmsgpack.pack(asked)
elseif leveled then
  local order = {PLAIN_LEVEL}
  for _, member in ipairs(redis.call('SMEMBERS', KEYS[8])) do
    local level = tonumber(member)
    if level == PLAIN_LEVEL then grouped = true
    elseif level and level >= 0 and level <= 9 then order[#order + 1] = level end
  end
  table.sort(order)
  sources = {}
  for _, level in ipairs(order) do
    local length = ready
    if level ~= PLAIN_LEVEL then
      length = redis.call('LLEN', KEYS[9 + level])
    elseif grouped then
      length = ready + group_lengths(KEYS[19], tonumber(ARGV[1]))
    end
    if length > 0 then
      sources[#sources + 1] = {level, length}
    elseif level ~= PLAIN_LEVEL or grouped then
      redis.call('SREM', KEYS[8], level)
    end
  end
  ready = 0
  for _, source in ipairs(sources) do ready = ready + source[2] end
end
if redis.call('EXISTS', KEYS[6]) == 1 then ready = 0 end
local take = math.min(tonumber(ARGV[1]), math.ceil(ready / tonumber(ARGV[5])))
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local limited = false  -- with a rate limit: records the tasks reserved, adds the wait
if rate then
  local exact = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
  local period = tonumber(ARGV[rate_at])
  local interval = period / tonumber(ARGV[rate_at + 1])
  -- Redis data is not trusted: a garbled or NaN TAT reads as now, and none may lie
  -- further ahead than one period (no garbage blocks the queue for long).
  -- A worker late for its turn (its wake-up, the round trip) keeps it: the next turn
  -- is one interval after the missed one, not after now, so lateness does not pile up
  -- (up to one interval of it; a TAT further behind, or none, reads as now).
  local tat = tonumber(redis.call('GET', rate) or '') or exact
  if not (tat > exact - interval) then
    tat = exact
  elseif tat > exact + period then
    tat = exact + period
  end
  -- the free tasks: n such that tat + (n - 1) * interval <= exact
  local free = math.floor((exact - tat) / interval + 1e-9) + 1
  if free < take then take = math.max(free, 0) end
  limited = function(result)
    tat = tat + (#result - 2) * interval
    if #result > 2 then
      redis.call('SET', rate, string.format('%.3f', tat), 'PX', math.ceil(tat + interval - exact) + 1)
    end
    table.insert(result, 3, math.max(0, math.ceil(tat - exact)))
  end
end
local items = false
if take > 0 and not sources then
  items = redis.call('LPOP', KEYS[1], take)
elseif take > 0 then
  items = {}
  for _, source in ipairs(sources) do
    local level, length = source[1], source[2]
    local count = math.min(take - #items, length)
    if count <= 0 then break end
    local taken, emptied = nil, count == length and level ~= PLAIN_LEVEL
    if level == PLAIN_LEVEL and grouped then
      taken, emptied = take_turns(KEYS[19], KEYS[1], count)
    else
      taken = redis.call('LPOP', KEYS[9 + level], count)
    end
    for _, item in ipairs(taken) do items[#items + 1] = item end
    if emptied then redis.call('SREM', KEYS[8], level) end
  end
end
local result = {now, ready - take}
if not items then
  redis.call('DEL', KEYS[3])
  if claims then redis.call('DEL', claims) end
  if limited then limited(result) end
  return cmsgpack.pack(result)
end
local default_timeout = tonumber(ARGV[2])
local grace = tonumber(ARGV[3])
local margin = tonumber(ARGV[4])
local unconfirmed = ARGV[9] == '1'
local any_cancelled = redis.call('SCARD', KEYS[5]) > 0
local ids = {}
local scored = {}  -- score, member pairs: one ZADD for the whole batch
-- Each timeout's score, as text: a number passed to redis.call is formatted (%.17g)
-- for every member, and most of a batch shares one timeout (6% of this script's time).
local scores = {}
local longest = 0
for _, original in ipairs(items) do
  local reserved = original
  local timeout = default_timeout
  local dropped = false
  local attempts_at, timeout_at, id_at, id_length = header_at(original)
  if attempts_at then
    local id = string.sub(original, id_at, id_at + id_length - 1)
    ids[#ids + 1] = id
    dropped = any_cancelled and redis.call('SREM', KEYS[5], id) == 1
    local attempts = struct.unpack('>I4', original, attempts_at)
    local own_timeout = struct.unpack('>I4', original, timeout_at)
    reserved = with_attempts(original, attempts_at, attempts + 1)
    if own_timeout > 0 then timeout = own_timeout end
  end
  if not dropped then  -- a task cancelled while pending leaves the queue here, unrun
    local score = scores[timeout]
    if unconfirmed then
      score = string.format('%d.5', now + margin)
    elseif not score then
      score = string.format('%d', now + margin + timeout + grace)
      scores[timeout] = score
    end
    scored[#scored + 1] = score
    scored[#scored + 1] = reserved
    result[#result + 1] = reserved
    if timeout > longest then longest = timeout end
  end
end
if #scored > 0 then redis.call('ZADD', KEYS[2], unpack(scored)) end
if cap > 0 then
  for i = 3, #result do task_event(KEYS[7], cap, 'started', result[i]) end
end
local reply = cmsgpack.pack(result)
if claims and #result > 2 then
  local lasting = margin + longest + grace
  if unconfirmed then lasting = margin + 1 end
  redis.call('SET', claims, reply, 'PX', lasting)
elseif claims then
  redis.call('DEL', claims)
end
if #ids > 0 then redis.call('SREM', KEYS[4], unpack(ids)) end
if ready > #items then
  if redis.call('LLEN', KEYS[3]) == 0 then redis.call('RPUSH', KEYS[3], 1) end
else
  redis.call('DEL', KEYS[3])
end
if limited then
  limited(result)
  reply = cmsgpack.pack(result)
end
return reply
