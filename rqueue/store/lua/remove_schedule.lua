-- remove_schedule.lua: delete a schedule from its queue.
-- KEYS[1] schedules zset   KEYS[2] schedule-defs hash
-- ARGV[1] schedule name
-- Returns 1 if it existed, else 0.
-- Invariant: a schedule is on the timeline only while its definition exists, so a
-- worker's pending fire of a removed schedule fails its compare-and-set.
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('HDEL', KEYS[2], ARGV[1])
