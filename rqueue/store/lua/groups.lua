-- groups.lua: fair groups (using(group=...)): the tasks of a queue's groups take turns.
-- Not a script of its own: levels.lua puts it in. A group's ready tasks wait on a list
-- of their own, named by the queue's turns key (levels.lua's KEYS[L + 13]) followed by
-- the group's name; the turns key is a sorted set of the groups with tasks ready, each
-- scored by its next turn. The plain ready list (tasks without a group) takes its turns
-- too, as the member '' (a group's name is never empty), while it has tasks. Each task
-- taken moves its group's turn past every other's, so a group waits at most one turn
-- of each other group, however many tasks any of them holds; an empty group costs
-- nothing: it leaves the set and its list is gone.
-- Invariant: a group is in the turns set exactly while its list has tasks ('' joins
-- lazily: reserve.lua adds it when it takes turns and the plain list has tasks).
-- last_turn(turns): the highest turn given out so far (0: none).
local function last_turn(turns)
  local last = redis.call('ZRANGE', turns, -1, -1, 'WITHSCORES')
  return tonumber(last[2] or 0)
end
-- to_group(turns, group, payload, front): push a ready task onto its group's list (the
-- front if `front`); a group that had none joins the turns after every other.
local function to_group(turns, group, payload, front)
  local length
  if front then length = redis.call('LPUSH', turns .. group, payload)
  else length = redis.call('RPUSH', turns .. group, payload) end
  if length == 1 then redis.call('ZADD', turns, 'NX', last_turn(turns) + 1, group) end
end
-- group_lengths(turns, most): how many tasks the next `most` groups in turn hold (the
-- plain list's not counted): what a reserve call may take at most from the groups.
local function group_lengths(turns, most)
  local total = 0
  for _, group in ipairs(redis.call('ZRANGE', turns, 0, most - 1)) do
    if group ~= '' then total = total + redis.call('LLEN', turns .. group) end
  end
  return total
end
-- take_turns(turns, plain, count): up to `count` ready tasks, one from each group (and
-- the plain list) in turn; returns them, and true once no group has tasks left (the
-- turns set is gone then, so the caller drops level 5 from the levels set).
local function take_turns(turns, plain, count)
  if redis.call('LLEN', plain) > 0 and not redis.call('ZSCORE', turns, '') then
    redis.call('ZADD', turns, last_turn(turns) + 1, '')
  end
  local items, last = {}, last_turn(turns)
  while #items < count do
    local head = redis.call('ZRANGE', turns, 0, 0)[1]
    if not head then break end
    local list = plain
    if head ~= '' then list = turns .. head end
    local item = redis.call('LPOP', list)
    if item then items[#items + 1] = item end
    if item and redis.call('LLEN', list) > 0 then
      last = last + 1
      redis.call('ZADD', turns, last, head)
    else
      redis.call('ZREM', turns, head)
    end
  end
  local left = redis.call('ZCARD', turns)
  if left == 0 or (left == 1 and redis.call('ZSCORE', turns, '')) then
    redis.call('DEL', turns)
    return items, true
  end
  return items, false
end
