-- read_failed.lua: a queue's failed records, by rank or by task id, read in one step.
-- KEYS[1] failed list   KEYS[2] failed lookup (failed_list.lua)
-- ARGV[1] 'window': ARGV[2], ARGV[3] the first and last rank (negative: from the other
--         end, as ZRANGE's), ARGV[4] '1' to count ranks from the newest (else from the
--         oldest). Returns {members, records}: the window's members in rank order and
--         their records.
-- ARGV[1] 'ids': ARGV[2..] task ids. Returns {members, records} of every record of
--         each id (an id's records are "<id>#1" up to the first missing n).
-- Invariant: changes nothing but a lookup a hand edit broke (indexed anew); a window
-- costs O(log n + window) in the lookup and a walk to it from the nearer end of the
-- list, an id O(log n) a record.
-- @failed_list
local list, lookup = KEYS[1], KEYS[2]
reindex(list, lookup)
local total = redis.call('LLEN', list)
local members, records = {}, {}
if ARGV[1] == 'ids' then
  for i = 2, #ARGV do
    local n = 1
    while true do
      local member = ARGV[i] .. '#' .. n
      local rank = redis.call('ZREVRANK', lookup, member)
      if not rank then break end
      members[#members + 1] = member
      records[#records + 1] = at(list, rank, total)
      n = n + 1
    end
  end
  return {members, records}
end
-- A negative rank counts back from the far end, as in ZRANGE (-1: the last there is).
local first, last = tonumber(ARGV[2]), tonumber(ARGV[3])
if first < 0 then first = math.max(0, total + first) end
if last < 0 then last = total + last end
last = math.min(last, total - 1)
if first > last then return {{}, {}} end
if ARGV[4] == '1' then
  return {redis.call('ZREVRANGE', lookup, first, last), between(list, first, last, total)}
end
members = redis.call('ZRANGE', lookup, first, last)
local newest_first = between(list, total - 1 - last, total - 1 - first, total)
for i = #newest_first, 1, -1 do records[#records + 1] = newest_first[i] end
return {members, records}
