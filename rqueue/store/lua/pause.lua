-- pause.lua: pause a queue, or resume it.
-- KEYS[1] the queue's paused flag   KEYS[2] its ready list   KEYS[3] its notify list
-- KEYS[4] its priority levels set (levels.lua): the tasks of a level other than 5 count
-- as ready too
-- ARGV[1] '1' to pause, '0' to resume
-- Returns 1 if the call changed the queue's state, 0 if it was already so.
-- Invariant: while the flag exists reserve.lua reserves nothing from the queue (tasks
-- already reserved run on, and new ones are still accepted); resuming a queue with
-- ready tasks pushes the notify token, so idle workers blocked on it wake at once.
if ARGV[1] == '1' then
  return redis.call('SET', KEYS[1], 1, 'NX') and 1 or 0
end
local resumed = redis.call('DEL', KEYS[1])
local ready = redis.call('LLEN', KEYS[2]) + redis.call('SCARD', KEYS[4])
if resumed == 1 and ready > 0 and redis.call('LLEN', KEYS[3]) == 0 then
  redis.call('RPUSH', KEYS[3], 1)
end
return resumed
