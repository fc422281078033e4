-- earliest_schedules.lua: what a scheduler tick reads of one queue, in one call.
-- KEYS[1] schedules zset (name -> next fire ms)   KEYS[2] schedule-defs hash
-- ARGV[1] how many entries to read   ARGV[2] ARGV[3] the fire times to read between,
-- as ZRANGEBYSCORE takes them ('-inf', '+inf', '(1700000000000' for "after")
-- ARGV[4] how many entries of that range to pass over first
-- ARGV[5] how far ahead of the clock, in ms, definitions are read (0: the due ones)
-- Returns one msgpack array: Redis's clock in ms (this node's, as clock.lua), then per
-- entry read, in timeline order: its name, its fire time (as ZRANGEBYSCORE gives it,
-- text), and its definition if the entry is due by that clock, or within ARGV[5] of
-- it (false if it is not, or if it has none).
-- Invariant: read only. One msgpack reply instead of three replies per schedule (a
-- ZRANGE pair and an HMGET entry), which cost a parent without hiredis more to parse
-- than firing the schedule did; the definitions are read with their scores, together.
-- A tick reads at most scheduler.BATCH entries a call (a plan, scheduler.PLAN_PAGE):
-- a bounded call.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local until_ms = now + tonumber(ARGV[5])
local read = {now}
local entries = redis.call(
  'ZRANGEBYSCORE', KEYS[1], ARGV[2], ARGV[3], 'WITHSCORES', 'LIMIT', ARGV[4], ARGV[1])
for i = 1, #entries, 2 do
  local name, score = entries[i], entries[i + 1]
  read[#read + 1] = name
  read[#read + 1] = score
  read[#read + 1] = tonumber(score) <= until_ms and redis.call('HGET', KEYS[2], name) or false
end
return cmsgpack.pack(read)
