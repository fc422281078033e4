-- batch_nested.lua: note a batch nested in this one (a member, or a step of a member's
-- chain), so that the tree of a workflow can be read from its outer batch down.
-- KEYS[1] the outer batch's state hash
-- ARGV[1] the nested batch's id   ARGV[2] the index of the member it belongs to
-- A field 'nested:<id>' of the outer batch's own hash: it expires and is pruned with
-- it, and writing it again (the nested batch opened twice) changes nothing.
-- Returns 1 if noted, 0 if there is no such outer batch (expired, pruned).
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'nested:' .. ARGV[1], ARGV[2])
return 1
