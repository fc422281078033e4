-- batch_pushed.lua: mark a batch whose members were all pushed.
-- KEYS[1] state hash
-- A batch that is a chain's link or a batch's member is opened by the worker that
-- completes what comes before it; if that worker dies before its ack, the next one
-- opens it again (batch_open.lua answers -1 once this mark is set) and pushes its
-- members only if they were not all pushed: a member pushed twice is counted once.
-- Returns 1 if marked, 0 if there is no such batch (pruned).
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'pushed', 1)
return 1
