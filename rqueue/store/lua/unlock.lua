-- unlock.lua: free a lock if, and only if, the given token holds it.
-- KEYS[1] the lock   ARGV[1] the token that took it (lock.lua)
-- Returns 1 if freed, 0 if another run holds it now (its lock expired and was taken).
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
