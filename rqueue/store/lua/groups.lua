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
-- group_lengths(turns, most): how many tasks the groups hold (the plain list's not
-- counted), at least: those of the next `most` groups in turn, read, and one for each
-- group after them. Enough for a reserve call of `most` to take its fair share, and
-- never 0 while a group has a task (the caller keeps workers woken by it).
local function group_lengths(turns, most)
  local total, plain_read = 0, false
  local heads = redis.call('ZRANGE', turns, 0, most - 1)
  for _, group in ipairs(heads) do
    if group ~= '' then total = total + redis.call('LLEN', turns .. group)
    else plain_read = true end
  end
  local rest = redis.call('ZCARD', turns) - #heads
  if rest > 0 and not plain_read and redis.call('ZSCORE', turns, '') then
    rest = rest - 1  -- the plain list's turn: its tasks are the caller's to count
  end
  return total + rest
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
    -- a round: the next groups in turn, as many as tasks are still wanted, one task
    -- each (the order of taking one at a time); a group alone gives all that is wanted
    local heads = redis.call('ZRANGE', turns, 0, count - #items - 1)
    if #heads == 0 then break end
    local each = 1
    if #heads == 1 then each = count - #items end
    for _, head in ipairs(heads) do
      local list = plain
      if head ~= '' then list = turns .. head end
      local taken = redis.call('LPOP', list, each) or {}
      for _, item in ipairs(taken) do items[#items + 1] = item end
      if #taken > 0 and redis.call('LLEN', list) > 0 then
        last = last + 1
        redis.call('ZADD', turns, last, head)
      else
        redis.call('ZREM', turns, head)
      end
    end
  end
  local left = redis.call('ZCARD', turns)
  if left == 0 or (left == 1 and redis.call('ZSCORE', turns, '')) then
    redis.call('DEL', turns)
    return items, true
  end
  return items, false
end
