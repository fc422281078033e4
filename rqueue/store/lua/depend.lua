-- depend.lua: register a task that waits for another (using(after=...)), in the slot of
-- the task it waits for (the dependency), or find that one finished already.
-- KEYS[1] the dependency's result key   KEYS[2] its dependents set
-- ARGV[1] the member: "<index>:<the waiting task's id>:<its queue>" (index: its place
-- among the tasks it waits for)   ARGV[2] the least time the set lasts (ms)
-- Returns {2, record} if the dependency's record is final (succeeded, failed or
-- cancelled) or unreadable (the caller judges it), {1} if the waiting task was added to
-- the set, {0} if there is no record (never dispatched, expired, or keeps no result).
-- Invariant: atomic with the scripts that write the outcome (keep_result.lua,
-- cancelled.lua, which turn the set into a notice in the same step), so a waiting task
-- either sees the outcome here or is in the set when it is written: none is missed.
-- The set lasts as long as the dependency's record may still be there, at least ARGV[2].
if redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then return {0} end
local raw = redis.call('GET', KEYS[1])
local ok, record = pcall(cmsgpack.unpack, raw)
local state = ok and type(record) == 'table' and record['state']
if state ~= 'pending' and state ~= 'delayed' and state ~= 'waiting' then return {2, raw} end
if redis.call('TYPE', KEYS[2])['ok'] ~= 'set' then redis.call('DEL', KEYS[2]) end
redis.call('SADD', KEYS[2], ARGV[1])
local lasts = math.max(redis.call('PTTL', KEYS[1]), tonumber(ARGV[2]))
if redis.call('PTTL', KEYS[2]) < lasts then redis.call('PEXPIRE', KEYS[2], lasts) end
return {1}
