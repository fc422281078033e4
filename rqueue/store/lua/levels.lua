-- levels.lua: priority levels (@task(priority=N)) and fair groups (using(group=...)), for
-- the scripts that move ready tasks.
-- Not a script of its own: put where a script has the line "-- @levels" (after
-- "-- @header"). A script that knows levels takes 14 KEYS in a row from some index L:
-- the ready lists of levels 0 to 9 (KEYS[L + n] is level n's; level 5's is the queue's
-- plain ready list, where a task without a priority goes), then the set of the levels
-- whose lists are not empty besides level 5's own list (KEYS[L + 10]: reserve.lua reads
-- the other lists only when it is not; 5 is in it while groups have tasks), the marker
-- that the queue has had prioritised or grouped tasks (KEYS[L + 11]: only then does a
-- script read a moved task's level and group from its payload), the aging hash
-- (KEYS[L + 12], rqueue work --aging) and the groups' turns (KEYS[L + 13], see groups.lua).
-- Invariant: a level other than 5 is in the set whenever its list is not empty (a
-- member whose list is empty is harmless: it is dropped when next seen); 5 is in it
-- whenever a group has tasks.
-- @groups
local PLAIN_LEVEL = 5
local MAX_GROUP = 200  -- a group name's most bytes (rqueue/tasks/groups.py checks dispatches)
local MP_FIXED = {[0xca] = 5, [0xcb] = 9, [0xcc] = 2, [0xcd] = 3, [0xce] = 5, [0xcf] = 9,
  [0xd0] = 2, [0xd1] = 3, [0xd2] = 5, [0xd3] = 9, [0xd4] = 3, [0xd5] = 4, [0xd6] = 6,
  [0xd7] = 10, [0xd8] = 18}  -- the width of each fixed-width msgpack type, by its byte
-- mp_skip(s, at): the index just past the msgpack value starting at s[at].
local function mp_skip(s, at)
  local b = string.byte(s, at)
  if b <= 0x7f or b >= 0xe0 or b == 0xc0 or b == 0xc2 or b == 0xc3 then return at + 1 end
  if b >= 0xa0 and b <= 0xbf then return at + 1 + b - 0xa0 end
  local count, pairs_of = nil, 1
  if b >= 0x90 and b <= 0x9f then count, at = b - 0x90, at + 1
  elseif b >= 0x80 and b <= 0x8f then count, pairs_of, at = b - 0x80, 2, at + 1
  elseif b == 0xdc or b == 0xde then count, at = struct.unpack('>I2', s, at + 1), at + 3
  elseif b == 0xdd or b == 0xdf then count, at = struct.unpack('>I4', s, at + 1), at + 5
  end
  if count then
    if b == 0xde or b == 0xdf then pairs_of = 2 end
    for _ = 1, count * pairs_of do at = mp_skip(s, at) end
    return at
  end
  if b == 0xc4 or b == 0xd9 then return at + 2 + string.byte(s, at + 1) end
  if b == 0xc5 or b == 0xda then return at + 3 + struct.unpack('>I2', s, at + 1) end
  if b == 0xc6 or b == 0xdb then return at + 5 + struct.unpack('>I4', s, at + 1) end
  if b == 0xc7 then return at + 3 + string.byte(s, at + 1) end
  if b == 0xc8 then return at + 4 + struct.unpack('>I2', s, at + 1) end
  if b == 0xc9 then return at + 6 + struct.unpack('>I4', s, at + 1) end
  return at + MP_FIXED[b]
end
-- mp_find(s, at, key): in the map at s[at], where the value of the string `key` starts.
local function mp_find(s, at, key)
  local b = string.byte(s, at)
  if b < 0x80 or b > 0x8f then return nil end  -- options and meta are small maps
  at = at + 1
  for _ = 1, b - 0x80 do
    local k = string.byte(s, at)
    local found = k >= 0xa0 and k <= 0xbf and string.sub(s, at + 1, at + k - 0xa0) == key
    at = mp_skip(s, at)
    if found then return at end
    at = mp_skip(s, at)
  end
  return nil
end
-- mp_text(s, at): the msgpack string at s[at] (nil for any other type).
local function mp_text(s, at)
  local b = string.byte(s, at)
  if b >= 0xa0 and b <= 0xbf then return string.sub(s, at + 1, at + b - 0xa0) end
  if b == 0xd9 then return string.sub(s, at + 2, at + 1 + string.byte(s, at + 1)) end
  if b == 0xda then
    local length = struct.unpack('>I2', s, at + 1)
    return string.sub(s, at + 3, at + 2 + length)
  end
  return nil
end
-- read_lane(payload): the level and group its options' meta map carries (the element
-- after task, queue, dispatched_at, args and kwargs, past the 29-byte header).
local function read_lane(payload)
  local at = 30
  for _ = 1, 5 do at = mp_skip(payload, at) end
  local meta = mp_find(payload, at, 'meta')
  if not meta then return PLAIN_LEVEL, nil end
  local level_at, group_at = mp_find(payload, meta, 'priority'), mp_find(payload, meta, 'group')
  local level = level_at and string.byte(payload, level_at)
  if not (level and level <= 9) then level = PLAIN_LEVEL end
  local group = group_at and mp_text(payload, group_at)
  if level ~= PLAIN_LEVEL or not group or #group == 0 or #group > MAX_GROUP then group = nil end
  return level, group
end
-- payload_level(payload, used): the payload's level and group (nil: none), 5 and none
-- unless the queue has had prioritised or grouped tasks (`used`) and the payload is a
-- task that carries one. Bytes that do not read as a payload are plain.
local function payload_level(payload, used)
  if not used or not header_at(payload) then return PLAIN_LEVEL, nil end
  local ok, level, group = pcall(read_lane, payload)
  if ok then return level, group end
  return PLAIN_LEVEL, nil
end
-- to_level(at, level, payload, front, group): push a ready task onto its level's list,
-- or its group's (the front if `front`), noting a prioritised level or the groups in
-- the set.
local function to_level(at, level, payload, front, group)
  if group then
    to_group(KEYS[at + 13], group, payload, front)
    redis.call('SADD', KEYS[at + 10], PLAIN_LEVEL)
    return
  end
  if front then redis.call('LPUSH', KEYS[at + level], payload)
  else redis.call('RPUSH', KEYS[at + level], payload) end
  if level ~= PLAIN_LEVEL then redis.call('SADD', KEYS[at + 10], level) end
end
