-- batch_add.lua: make room for members added to a batch from inside one of its members.
-- KEYS[1] state hash   KEYS[2] adds hash   KEYS[3] member queues set
-- ARGV[1] the call's token (the adding member's id and the call's number in its run)
-- ARGV[2] how many members   ARGV[3..] the queues they go to
-- Returns {the first new index, results}, results '1' if the batch's callbacks get its
-- members' results (the added members then send theirs), or {-1} if there is no such
-- batch.
-- Invariant: the total grows before any added member is pushed, and once per token: a
-- member that runs twice gets the same indexes back and, with the same derived ids,
-- pushes nothing new (push_once.lua).
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local results = redis.call('HGET', KEYS[1], 'results') or '0'
local first = redis.call('HGET', KEYS[2], ARGV[1])
if first then return {tonumber(first), results} end
first = tonumber(redis.call('HGET', KEYS[1], 'total'))
redis.call('HINCRBY', KEYS[1], 'total', tonumber(ARGV[2]))
redis.call('HSET', KEYS[2], ARGV[1], first)
if #ARGV > 2 then redis.call('SADD', KEYS[3], unpack(ARGV, 3)) end
return {first, results}
