-- claim_names.lua: enter new schedules' names in the global schedule index, all or none.
-- KEYS[1] the schedule index hash (rqueue:schedules: name -> queue)
-- ARGV[1] ARGV[2] the first name and the queue it fires into, ARGV[3] ARGV[4] the next
--   pair, and so on.
-- Returns the names that are taken already (claiming none of them then), or an empty
-- list when every name was claimed.
-- Invariant: a name fires into one queue: two adds of one name never both succeed,
-- and a refused bulk add leaves the index as it found it. A bulk add sends at most
-- schedule_store.SAVE_CHUNK pairs a call: a bounded call.
local taken = {}
for i = 1, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then taken[#taken + 1] = ARGV[i] end
end
if #taken == 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
return taken
