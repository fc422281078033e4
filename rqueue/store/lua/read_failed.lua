-- read_failed.lua: one window of a queue's failed records, by rank, read in one step.
-- KEYS[1] failed index (zset: record key -> failed at, µs)   KEYS[2] failed records (hash)
-- ARGV[1], ARGV[2] the first and last rank (0 the oldest, or with ARGV[3] the newest)
-- ARGV[3] '1' to count ranks from the newest
-- Returns {keys, records}: the window's record keys in rank order and their bytes.
-- Invariant: reads only; O(log n + window), so a page of a million records costs what
-- a page of fifty does.
local range = ARGV[3] == '1' and 'ZREVRANGE' or 'ZRANGE'
local keys = redis.call(range, KEYS[1], ARGV[1], ARGV[2])
if #keys == 0 then return {{}, {}} end
return {keys, redis.call('HMGET', KEYS[2], unpack(keys))}
