-- clock.lua: Redis's clock, read on the node that holds a queue.
-- KEYS[1] any key of the queue: it only routes the call. On Redis Cluster each shard
--         has its own clock, and a queue's due times are written by scripts on its
--         shard (push.lua, migrate.lua), so they are compared with that clock alone.
-- Returns the time in milliseconds.
local time = redis.call('TIME')
return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
