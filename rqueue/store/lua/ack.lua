-- ack.lua: forget tasks that completed.
-- KEYS[1] reserved zset
-- ARGV[1..] reserved payloads, the exact bytes reserve.lua returned
-- Returns how many were still reserved.
-- Invariant: a completed task is in no key of its queue afterwards.
return redis.call('ZREM', KEYS[1], unpack(ARGV))
