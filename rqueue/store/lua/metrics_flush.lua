-- metrics_flush.lua: add one worker child's counts to a queue's metrics, for one
-- minute and for all time, in one step (rqueue/metrics/collector.py sends at most one
-- call a second per queue).
-- KEYS[1] the queue's all-time metrics hash (QueueKeys.metrics)
-- KEYS[2] the metrics hash of the minute the counts belong to (QueueKeys.metrics_minute)
-- ARGV[1] seconds the minute's hash lives after this call (a day and a minute)
-- ARGV[2] width: how many numbers a task's counts hold (rqueue/metrics/schema.py)
-- then, per task: its name, then `width` numbers to add to its counts
-- Each hash maps a task name to its counts: a msgpack array of `width` numbers.
-- Returns how many tasks' counts were added.
-- Invariant: the same numbers are added to the minute's hash and to the all-time
-- hash; the minute's hash expires ARGV[1] seconds after its last write, so a queue
-- holds at most a day of minutes. The keys hold the workers' own counts: a key of
-- another type, or a value that is not an array of `width` numbers from 0 to 2^53
-- (written by hand, say), is replaced rather than failing the call, which would lose
-- every count in it.
for _, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'hash' and kind ~= 'none' then redis.call('DEL', key) end
end

local width = tonumber(ARGV[2])

local function add(key, task, first)
  local old = nil
  local packed = redis.call('HGET', key, task)
  if packed then
    local ok, decoded = pcall(cmsgpack.unpack, packed)
    if ok and type(decoded) == 'table' and #decoded == width then old = decoded end
  end
  local sum = {}
  for i = 1, width do
    local before = old and tonumber(old[i]) or 0
    if not before or before ~= before or before < 0 or before > 9007199254740992 then
      before = 0  -- not a number, NaN, negative or past 2^53: garbage starts over
    end
    sum[i] = before + tonumber(ARGV[first + i])
  end
  redis.call('HSET', key, task, cmsgpack.pack(sum))
end

local tasks = 0
for at = 3, #ARGV, width + 1 do
  add(KEYS[1], ARGV[at], at)
  add(KEYS[2], ARGV[at], at)
  tasks = tasks + 1
end
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[1]))
return tasks
