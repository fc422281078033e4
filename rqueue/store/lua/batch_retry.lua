-- batch_retry.lua: open a batch again before some of its failed members are pushed back.
-- KEYS[1..8] as batch_member.lua (state hash, the three bitmaps, failed-ids, adds,
-- queues, results)
-- ARGV pairs: a member's index, its task id, for each member about to be retried
-- Returns how many of them were counted as failed (they are pending again), or -1 if
-- there is no such batch.
-- Invariant: a retried member is pending again (its failed bit, count and id are
-- cleared), and the batch is neither cancelled nor finished nor expiring, so the
-- member runs instead of being skipped, and the batch finishes (and expires) again
-- once every member is counted. Callbacks already fired do not fire again; then
-- still fires if every member succeeds now.
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local reopened = 0
for i = 1, #ARGV, 2 do
  local index = tonumber(ARGV[i])
  if redis.call('GETBIT', KEYS[3], index) == 1 then
    redis.call('SETBIT', KEYS[3], index, 0)
    redis.call('HINCRBY', KEYS[1], 'failed', -1)
    redis.call('SREM', KEYS[5], ARGV[i + 1])
    reopened = reopened + 1
  end
end
if reopened > 0 then
  redis.call('HDEL', KEYS[1], 'cancelled_at', 'finished_at')
  for i = 1, #KEYS do redis.call('PERSIST', KEYS[i]) end
end
return reopened
