-- header.lua: the payload's fixed header (rqueue/store/header.py), for the scripts.
-- Not a script of its own: scripts.py puts it where a script has the line "-- @header".
-- A payload is a msgpack array: a fixarray marker (9 to 15 elements), the attempt count
-- and the timeout in ms as uint32 (0xce and 4 bytes each), the id as 16 raw bytes
-- (0xc4 0x10, bin 8): attempts at byte 3, timeout at 8, id at 14 to 29. Bytes without
-- that header get nil from both.
-- header_at(payload): where the attempts, the timeout and the id start, and the id's
-- length; nil for bytes that are not an rqueue payload. string.byte reads without
-- allocating, so the test costs no garbage.
local function header_at(payload)
  local b1, b2 = string.byte(payload, 1, 2)
  if #payload > 29 and b1 >= 0x99 and b1 <= 0x9f and b2 == 206 then
    local b7, b12, b13 = string.byte(payload, 7), string.byte(payload, 12, 13)
    if b7 == 206 and b12 == 196 and b13 == 16 then return 3, 8, 14, 16 end
  end
  return nil
end
-- payload_id(payload): its id as stored in the pending-ids and cancelled sets, or nil.
local function payload_id(payload)
  local _, _, id_at, id_length = header_at(payload)
  if id_at then return string.sub(payload, id_at, id_at + id_length - 1) end
  return nil
end
-- with_attempts(payload, at, attempts): the payload with its counter (at byte `at`) set.
local function with_attempts(payload, at, attempts)
  return string.sub(payload, 1, at - 1) .. struct.pack('>I4', attempts) .. string.sub(payload, at + 4)
end
-- attempt_returned(payload): the payload with its counter one lower (not below 0), for a
-- task given back that never started; bytes without the header come back as they are.
local function attempt_returned(payload)
  local attempts_at = header_at(payload)
  if not attempts_at then return payload end
  local attempts = struct.unpack('>I4', payload, attempts_at)
  if attempts == 0 then return payload end
  return with_attempts(payload, attempts_at, attempts - 1)
end
