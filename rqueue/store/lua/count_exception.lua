-- count_exception.lua: count one exception raised by a task with max_exceptions.
-- KEYS[1] the task's exceptions counter (QueueKeys.exceptions), in its queue's slot
-- ARGV[1] milliseconds to keep the count from now: past the task's next attempt,
--         which may wait a backoff and then a backlog
-- Returns the count, this exception included.
-- Invariant: the increment and its expiry are one step, and the count returned is
-- the one this exception made, so two workers never both read a count below the
-- limit for the same exception. The worker deletes the key once the task finishes
-- for good, so a retry from the failed list counts afresh.
local count = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return count
