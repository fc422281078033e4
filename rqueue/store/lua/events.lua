-- events.lua: adding a task's event to its queue's event stream (rqueue events).
-- Not a script of its own: scripts.py puts it where a script has the line "-- @events",
-- after "-- @header" (it reads the payload's header). Each event is one stream entry
-- of string fields: event (dispatched, started, progress, retried, succeeded, failed,
-- cancelled), id (32 hex digits), task, attempt, and for some an error type or a
-- progress fraction and message. Its time is the entry's id (Redis's clock, ms); its
-- queue, the stream's. The stream is capped: XADD ... MAXLEN ~ cap.
-- add_event(stream, cap, fields): one XADD of `fields` (a flat Lua list).
local function add_event(stream, cap, fields)
  redis.call('XADD', stream, 'MAXLEN', '~', cap, '*', unpack(fields))
end
-- payload_task(payload): the task name a payload carries (its fourth element, a msgpack
-- string right after the 29-byte header), or '' if it has none there.
local function payload_task(payload)
  local kind = string.byte(payload, 30) or 0
  local length, at = nil, 31
  if kind >= 0xa0 and kind <= 0xbf then
    length = kind - 0xa0
  elseif kind == 0xd9 then
    length, at = string.byte(payload, 31) or 0, 32
  elseif kind == 0xda then
    local high, low = string.byte(payload, 31, 32)
    length, at = (high or 0) * 256 + (low or 0), 33
  end
  if not length then return '' end
  return string.sub(payload, at, at + length - 1)
end
-- task_event(stream, cap, event, payload, ...): the event of the task in `payload`
-- (its id, task name and attempt read from its bytes), with the field/value pairs
-- given after it; nothing for bytes that are not a task (no header).
local function task_event(stream, cap, event, payload, ...)
  local attempts_at, _, id_at = header_at(payload)
  if not attempts_at then return end
  local id = string.format(string.rep('%02x', 16), string.byte(payload, id_at, id_at + 15))
  local attempt = struct.unpack('>I4', payload, attempts_at)
  add_event(stream, cap, {'event', event, 'id', id, 'task', payload_task(payload),
    'attempt', attempt, ...})
end
