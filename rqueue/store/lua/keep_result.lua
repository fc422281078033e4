-- keep_result.lua: writing the kept result of a task that finished, for the scripts
-- that acknowledge or fail one (ack, reserve, fail, push_once).
-- Not a script of its own: scripts.py puts it where a script has "-- @keep_result",
-- after "-- @header" (it reads the task's id from its payload).
-- keep_result(result, done, finished, record, ms, payload): the record at the task's
-- result key for `ms`; one token in its done list, which a waiting caller moves in
-- place (BLMOVE done done), so every waiter wakes and it stays for those who come
-- later; and its raw id in the queue's finished index (a zset of id -> when it
-- finished, in seconds to the microsecond), which keeps the newest 1000 (store/browse.py FINISHED_KEPT), so the
-- dashboard lists recently finished tasks without a scan.
local function keep_result(result, done, finished, record, ms, payload)
  redis.call('SET', result, record, 'PX', ms)
  redis.call('DEL', done)
  redis.call('RPUSH', done, 1)
  redis.call('PEXPIRE', done, ms)
  local id = payload_id(payload)
  if id then
    local time = redis.call('TIME')
    redis.call('ZADD', finished, time[1] .. '.' .. string.format('%06d', tonumber(time[2])), id)
    redis.call('ZREMRANGEBYRANK', finished, 0, -1001)
  end
end
