-- earliest_schedules.lua: what a scheduler tick reads of one queue, in one call.
-- KEYS[1] schedules zset (name -> next fire ms)   KEYS[2] schedule-defs hash
-- ARGV[1] how many entries to read from the front of the timeline
-- Returns one msgpack array: Redis's clock in ms (this node's, as clock.lua), then per
-- entry read, in timeline order: its name, its fire time (as ZRANGE gives it, text),
-- and its definition if the entry is due by that clock (false if it is not, or if it
-- has none).
-- Invariant: read only. One msgpack reply instead of three replies per schedule (a
-- ZRANGE pair and an HMGET entry), which cost a parent without hiredis more to parse
-- than firing the schedule did; the definitions are read with their scores, together.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local read = {now}
local entries = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 1, #entries, 2 do
  local name, score = entries[i], entries[i + 1]
  read[#read + 1] = name
  read[#read + 1] = score
  read[#read + 1] = tonumber(score) <= now and redis.call('HGET', KEYS[2], name) or false
end
return cmsgpack.pack(read)
