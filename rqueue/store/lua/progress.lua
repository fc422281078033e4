-- progress.lua: record how far a running task has come (current_job().progress()).
-- KEYS[1] the task's progress key (a hash: fraction, message, at)
-- KEYS[2] the queue's event stream
-- ARGV[1] the fraction done, 0 to 1 (checked by the caller)   ARGV[2] a message, or ''
-- ARGV[3] milliseconds the record lasts (it expires: a task that never finishes
-- leaves nothing behind)   ARGV[4] the stream's cap: 0 records no event
-- ARGV[5] the task's id (16 raw bytes, as events carry it)   ARGV[6] its task name
-- ARGV[7] its attempt
-- Returns Redis's clock in ms: when the progress was recorded (its "at").
-- Invariant: the record holds the latest report only: each report replaces the key
-- (whatever it held), and a "progress" event goes to the stream in the same step when
-- events are on.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'fraction', ARGV[1], 'message', ARGV[2], 'at', now)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local cap = tonumber(ARGV[4])
if cap > 0 then
  redis.pcall('XADD', KEYS[2], 'MAXLEN', '~', cap, '*', 'event', 'progress', 'id', ARGV[5],
    'task', ARGV[6], 'attempt', ARGV[7], 'fraction', ARGV[1], 'message', ARGV[2])
end
return now
