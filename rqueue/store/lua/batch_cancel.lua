-- batch_cancel.lua: cancel a batch; members not yet started are skipped, not run.
-- KEYS[1] state hash
-- Returns 1 if cancelled now, 0 if it was already, -1 if there is no such batch.
-- Invariant: a batch is cancelled once and for good (batch_member.lua counts its
-- skipped members, so it still finishes and its finally callback still runs).
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
return redis.call('HSETNX', KEYS[1], 'cancelled_at', now)
