-- events.lua: adding a task's event to its queue's event stream (rqueue events).
-- Not a script of its own: scripts.py puts it where a script has the line "-- @events",
-- after "-- @header" (it reads the payload's header). Each event is one stream entry
-- of string fields: event (dispatched, started, progress, retried, succeeded, failed,
-- cancelled), id (the task id's 16 raw bytes, as the pending-ids set holds it: formatting
-- it as hex in Lua took longer than the XADD), task, attempt, and for some an error type or a
-- progress fraction and message. Its time is the entry's id (Redis's clock, ms); its
-- queue, the stream's. The stream is capped: XADD ... MAXLEN ~ cap.
-- add_event(stream, cap, fields): one XADD of `fields` (a flat Lua list). By pcall: a
-- key of another type where the stream should be loses the event, never the state
-- change the script makes.
local function add_event(stream, cap, fields)
  redis.pcall('XADD', stream, 'MAXLEN', '~', cap, '*', unpack(fields))
end
-- string_at(bytes, at): the msgpack string (fixstr, str 8 or str 16) that starts at
-- byte `at`, or '' if none does. Read in place: no decoding of what surrounds it.
local function string_at(bytes, at)
  local kind = string.byte(bytes, at) or 0
  local length, first = nil, at + 1
  if kind >= 0xa0 and kind <= 0xbf then
    length = kind - 0xa0
  elseif kind == 0xd9 then
    length, first = string.byte(bytes, at + 1) or 0, at + 2
  elseif kind == 0xda then
    local high, low = string.byte(bytes, at + 1, at + 2)
    length, first = (high or 0) * 256 + (low or 0), at + 3
  end
  if not length then return '' end
  return string.sub(bytes, first, first + length - 1)
end
-- payload_task(payload): the task name a payload carries (its fourth element, a msgpack
-- string right after the 29-byte header), or ''.
local function payload_task(payload)
  return string_at(payload, 30)
end
-- record_error(record): the error type a failed record (a msgpack map the worker built,
-- rqueue/failed.py) names: the string after its key "exception" (the first: only the
-- task's name comes before it), or ''.
local function record_error(record)
  local _, key_end = string.find(record, '\169exception', 1, true)
  if not key_end then return '' end
  return string_at(record, key_end + 1)
end
-- marked_cap(marker): the cap a worker recording events left in the queue's marker
-- (migrate.lua), or nil while none records: what producers' scripts go by. Whatever
-- else the key holds reads as nil, and a cap as at most 10,000,000 entries.
local function marked_cap(marker)
  local cap = tonumber(redis.call('GET', marker) or '')
  if not cap or cap < 1 then return nil end
  return math.min(math.floor(cap), 10000000)
end
-- task_event(stream, cap, event, payload, ...): the event of the task in `payload`
-- (its id, task name and attempt read from its bytes), with the field/value pairs
-- given after it; nothing for bytes that are not a task (no header).
local function task_event(stream, cap, event, payload, ...)
  local attempts_at, _, id_at = header_at(payload)
  if not attempts_at then return end
  local id = string.sub(payload, id_at, id_at + 15)
  local attempt = struct.unpack('>I4', payload, attempts_at)
  add_event(stream, cap, {'event', event, 'id', id, 'task', payload_task(payload),
    'attempt', attempt, ...})
end
