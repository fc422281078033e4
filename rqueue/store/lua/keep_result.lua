-- keep_result.lua: writing the kept result of a task that finished, for the scripts
-- that acknowledge or fail one (ack, reserve, fail, push_once).
-- Not a script of its own: scripts.py puts it where a script has "-- @keep_result",
-- after "-- @header" and "-- @dependents" (it reads the task's id from its payload).
-- keep_result(at, record, ms, payload): KEYS[at..at+5] are the task's result key, its
-- done list, the queue's finished index, the task's dependents set, the queue's
-- resolved list and its timer list (calls.py _keep lays them out); the record at the task's
-- result key for `ms`; one token in its done list, which a waiting caller moves in
-- place (BLMOVE done done), so every waiter wakes and it stays for those who come
-- later; and its raw id in the queue's finished index (a zset of id -> when it
-- finished, in seconds to the microsecond), which keeps the newest 1000 (store/browse.py FINISHED_KEPT), so the
-- dashboard lists recently finished tasks without a scan. Then the tasks waiting for it
-- are told (dependents.lua), in the same step as its outcome is written.
local function keep_result(at, record, ms, payload)
  local result, done, finished = KEYS[at], KEYS[at + 1], KEYS[at + 2]
  redis.call('SET', result, record, 'PX', ms)
  redis.call('DEL', done)
  redis.call('RPUSH', done, 1)
  redis.call('PEXPIRE', done, ms)
  local id = payload_id(payload)
  if id then
    local time = redis.call('TIME')
    redis.call('ZADD', finished, time[1] .. '.' .. string.format('%06d', tonumber(time[2])), id)
    redis.call('ZREMRANGEBYRANK', finished, 0, -1001)
    notify_dependents(KEYS[at + 3], KEYS[at + 4], KEYS[at + 5], id, record)
  end
end
