-- flush_failed.lua: delete the oldest records of a failed list, a bounded number a call.
-- KEYS[1] failed list
-- ARGV[1] the most records to delete (failed.CHUNK)
-- Returns how many were deleted: fewer than ARGV[1] only if the list is now empty.
-- Invariant: each call costs O(ARGV[1]), so flushing a million records never blocks
-- Redis for long; stopped between calls, what is left is the newest records, intact.
local count = math.min(redis.call('LLEN', KEYS[1]), tonumber(ARGV[1]))
if count > 0 then redis.call('LTRIM', KEYS[1], count, -1) end
return count
