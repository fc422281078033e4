-- batch_cancel.lua: cancel a batch; members not yet started are skipped, not run.
-- KEYS[1] state hash
-- Returns 1 if cancelled now, 0 if it was already (a failure cancels it too), 2 if it
-- has finished uncancelled (every member counted: nothing is left to skip, so nothing
-- changes), -1 if there is no such batch (nor a hash there: a key of another type is
-- no batch).
-- Invariant: a batch is cancelled once and for good (batch_member.lua counts its
-- skipped members, so it still finishes and its finally callback still runs); a
-- finished batch is never marked cancelled after the fact.
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return -1 end
if redis.call('HEXISTS', KEYS[1], 'cancelled_at') == 1 then return 0 end
if redis.call('HEXISTS', KEYS[1], 'finished_at') == 1 then return 2 end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
return redis.call('HSETNX', KEYS[1], 'cancelled_at', now)
