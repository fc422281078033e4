-- batch_open.lua: create a batch before its members are pushed.
-- KEYS[1] state hash   KEYS[2] member queues set
-- ARGV[1] total members   ARGV[2] name   ARGV[3] '1' to allow failures
-- ARGV[4] callbacks (msgpack, see workflows/batches.py)   ARGV[5] ms to keep the
-- batch once it finished   ARGV[6] '1' if it has a progress callback
-- ARGV[7] where it sits, if it is nested: '<outer batch id> <member index>' of the
-- batch whose member it is, or ''   ARGV[8] the id of the task or batch it follows in
-- its chain, or ''   ARGV[9] '1' if a callback gets the members' results (they send
-- them when counted)   ARGV[10..] the queues its members go to
-- Returns Redis's clock in ms (the batch's creation time), or 0 if it existed already,
-- or -1 if it existed and its members were all pushed (batch_pushed.lua): a worker
-- opening a nested batch again (it died before its ack) pushes them only if not.
-- Invariant: the counts start at 0 and the total is known before any member can run,
-- so a member that finishes at once cannot finish the batch early. A batch of no
-- members is finished at once (its caller pushes then and finally itself).
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HEXISTS', KEYS[1], 'pushed') == 1 then return -1 end
  return 0
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('HSET', KEYS[1], 'total', ARGV[1], 'name', ARGV[2], 'allow_failures', ARGV[3],
  'callbacks', ARGV[4], 'keep_ms', ARGV[5], 'progress', ARGV[6], 'results', ARGV[9],
  'created_at', now, 'succeeded', 0, 'failed', 0, 'skipped', 0)
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'parent', ARGV[7]) end
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'after', ARGV[8]) end
if #ARGV > 9 then redis.call('SADD', KEYS[2], unpack(ARGV, 10)) end
if tonumber(ARGV[1]) == 0 then
  redis.call('HSET', KEYS[1], 'finished_at', now)
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
return now
