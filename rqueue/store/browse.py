"""Reading a queue's tasks a window at a time, for people to browse: read-only.

The dashboard lists each queue's ready, delayed, running and recently finished tasks.
A queue may hold millions, and Redis runs one command at a time, so every read here
is a window: ``LRANGE`` of the ready list from its head (the next task a worker takes),
``ZRANGE`` of the delayed set by due time and of the reserved set by when each
reservation runs out, and ``ZREVRANGE`` of the finished index, newest first. Each is
one pipeline of the queue's own keys (one hash slot on Redis Cluster) with the list's
length, then one more for what the window's ids need (whether each was cancelled, a
finished task's kept result). Nothing here changes a key.

The finished index, ``queues:<name>:finished``, is a sorted set of raw task id ->
when it finished (epoch seconds), written by the scripts that write a kept result (ack.lua,
reserve.lua, fail.lua, push_once.lua through ``lua/keep_result.lua``) and capped there
at :data:`FINISHED_KEPT`: only tasks that keep their result (``keep_result``) are in
it, since only they leave anything behind to show. An entry may outlive its result,
which expires on its own: such an entry reads back with no record.

What is returned is bytes as Redis holds them: payloads, ids and records come from
whoever can write to Redis, and the layers above decode and check them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from rqueue.store.header import RAW_ID_LENGTH, payload_id, raw_id
from rqueue.store.keys import PLAIN_LEVEL
from rqueue.store.queue import RedisQueue

FINISHED_KEPT = 1000
"""Finished tasks a queue's index keeps, newest first: the cap in lua/keep_result.lua."""
MOST_READ = 500
"""The most entries one window reads (a page asks for fewer)."""
FIND_AROUND = 250
"""How far from where a list page saw a task :func:`find_payload` looks for it again:
the ready list moves towards its head as workers take tasks."""
_LARGEST_SCORE = 2**53
"""Scores past this (or NaN, or negative) are no time or deadline a script wrote."""


class Entry(NamedTuple):
    """One task of a window: its payload as held, and its score if it has one."""

    payload: bytes
    score_ms: float | None
    """When it is due (delayed), when its reservation runs out (running); None (ready)."""
    cancelled: bool = False
    """Its id is in the queue's cancelled set: a worker drops it when it comes up."""


class Window(NamedTuple):
    """Entries ``offset`` on of a list or set that held ``total`` when counted."""

    total: int
    offset: int
    entries: list[Entry]


class Finished(NamedTuple):
    """One entry of the finished index and the kept result it points at."""

    task_id: str | None
    """Its id as text; None for a member that is no task id (written by hand)."""
    finished_at: float | None
    """Epoch seconds (to the microsecond)."""
    record: bytes | None
    """The result record (msgpack, unchecked), or None once it expired."""


class FinishedWindow(NamedTuple):
    total: int
    offset: int
    entries: list[Finished]


class Found(NamedTuple):
    """Where :func:`find_payload` found a task's payload."""

    state: str
    """``ready``, ``delayed`` or ``running``."""
    payload: bytes
    score_ms: float | None


def _bounded(offset: int, limit: int) -> tuple[int, int]:
    if offset < 0 or limit < 1:
        raise ValueError(f"offset must be 0 or more and limit 1 or more, got {offset}, {limit}")
    return offset, offset + min(limit, MOST_READ) - 1


def ready(queue: RedisQueue, name: str, offset: int, limit: int) -> Window:
    """The ready tasks from ``offset``, head first: the order workers take them in."""
    first, last = _bounded(offset, limit)
    total, members = _ready_window(queue, name, first, last)
    found = [(member, None) for member in members if isinstance(member, bytes)]
    return Window(total, offset, _marked(queue, name, found))


def _ready_window(queue: RedisQueue, name: str, first: int, last: int) -> tuple[int, list[object]]:
    """How many tasks are ready, and those from rank ``first`` to ``last``, the priority
    levels' lists laid end to end, level 0 first (level 5 is the ready list, followed by
    the fair groups' lists in turn order: workers interleave those, a task a turn). One
    round trip while only level 5 has tasks (the window read with the lengths), two or
    three else."""
    keys = queue.keys(name)
    lists: list[str | bytes] = list(keys.levels[:10])
    pipe = queue.client.pipeline(transaction=False)
    for key in lists:
        pipe.llen(key)
    pipe.zrange(keys.turns, 0, -1)
    pipe.lrange(lists[PLAIN_LEVEL], first, last)
    *lengths, turns, plain = _replies(pipe)
    counts = [_count(length) for length in lengths]
    groups = [keys.turns.encode() + group for group in _listed(turns) if group]
    if groups:
        pipe = queue.client.pipeline(transaction=False)
        for group in groups:
            pipe.llen(group)
        at = PLAIN_LEVEL + 1
        lists[at:at] = groups
        counts[at:at] = [_count(length) for length in _replies(pipe)]
    elif sum(counts) == counts[PLAIN_LEVEL]:
        return counts[PLAIN_LEVEL], _listed(plain)
    pipe = queue.client.pipeline(transaction=False)
    start = 0
    for key, count in zip(lists, counts, strict=True):
        if count and start <= last and first < start + count:
            pipe.lrange(key, max(0, first - start), last - start)
        start += count
    return sum(counts), [member for part in _replies(pipe) for member in _listed(part)]


def delayed(queue: RedisQueue, name: str, offset: int, limit: int) -> Window:
    """The delayed set from ``offset``, soonest due first (score: due time, ms)."""
    return _by_score(queue, name, queue.keys(name).delayed, offset, limit, cancelled=True)


def running(queue: RedisQueue, name: str, offset: int, limit: int) -> Window:
    """The reserved set from ``offset``: the tasks workers hold now, the reservation
    that runs out first first (score: when it runs out, ms)."""
    return _by_score(queue, name, queue.keys(name).reserved, offset, limit, cancelled=False)


def finished(queue: RedisQueue, name: str, offset: int, limit: int) -> FinishedWindow:
    """The finished index from ``offset``, newest first, with each one's kept result."""
    first, last = _bounded(offset, limit)
    keys = queue.keys(name)
    pipe = queue.client.pipeline(transaction=False)
    pipe.zcard(keys.finished)
    pipe.zrevrange(keys.finished, first, last, withscores=True)
    total, members = _replies(pipe)
    rows = [(_text_id(member), _score(score)) for member, score in _listed(members)]
    pipe = queue.client.pipeline(transaction=False)
    for task_id, _ in rows:
        if task_id is not None:
            pipe.get(keys.result(task_id))
    records = iter(_replies(pipe) if rows else [])
    entries = [
        Finished(task_id, at, next(records) if task_id is not None else None)
        for task_id, at in rows
    ]
    return FinishedWindow(_count(total), offset, entries)


def find_payload(queue: RedisQueue, name: str, task_id: str, near: int = 0) -> Found | None:
    """A task's payload if it is running, or ready or delayed within
    :data:`FIND_AROUND` of position ``near`` (where a list page showed it); None if it
    is none of those there. One pipeline of three bounded reads."""
    keys = queue.keys(name)
    first, last = max(0, near - FIND_AROUND), near + FIND_AROUND
    pipe = queue.client.pipeline(transaction=False)
    pipe.zrange(keys.reserved, 0, MOST_READ - 1, withscores=True)
    pipe.zrange(keys.delayed, first, last, withscores=True)
    reserved, delayed_part = _replies(pipe)
    _, ready_part = _ready_window(queue, name, first, last)
    for state, found in (
        ("running", _listed(reserved)),
        ("ready", [(member, None) for member in _listed(ready_part)]),
        ("delayed", _listed(delayed_part)),
    ):
        for member, score in found:
            if isinstance(member, bytes) and payload_id(member) == task_id:
                return Found(state, member, _score(score))
    return None


def standing(queue: RedisQueue, name: str, task_id: str) -> tuple[bool, bool]:
    """Whether the task is pending (ready or delayed, not yet taken: the pending-ids
    set) and whether it was cancelled while pending; one round trip, O(1) each."""
    try:
        stored = raw_id(task_id)
    except ValueError:
        return False, False
    keys = queue.keys(name)
    pipe = queue.client.pipeline(transaction=False)
    pipe.sismember(keys.pending_ids, stored)  # type: ignore[arg-type]  # bytes are fine
    pipe.sismember(keys.cancelled, stored)  # type: ignore[arg-type]
    pending, cancelled = _replies(pipe)
    return bool(pending), bool(cancelled)


def pending_in(queue: RedisQueue, task_id: str) -> str | None:
    """The known queue whose pending ids hold ``task_id``: one round trip per node."""
    try:
        stored = raw_id(task_id)
    except ValueError:
        return None
    names = queue.known_queues()
    pipe = queue.client.pipeline(transaction=False)
    for name in names:
        pipe.sismember(queue.keys(name).pending_ids, stored)  # type: ignore[arg-type]
    found = [name for name, held in zip(names, _replies(pipe), strict=True) if held]
    return found[0] if found else None


def _by_score(
    queue: RedisQueue, name: str, key: str, offset: int, limit: int, cancelled: bool
) -> Window:
    first, last = _bounded(offset, limit)
    pipe = queue.client.pipeline(transaction=False)
    pipe.zcard(key)
    pipe.zrange(key, first, last, withscores=True)
    total, members = _replies(pipe)
    found = [(m, _score(score)) for m, score in _listed(members) if isinstance(m, bytes)]
    if not cancelled:
        return Window(_count(total), offset, [Entry(member, score) for member, score in found])
    return Window(_count(total), offset, _marked(queue, name, found))


def _marked(
    queue: RedisQueue, name: str, found: Sequence[tuple[bytes, float | None]]
) -> list[Entry]:
    """Entries, each marked if its id is in the queue's cancelled set (one round trip)."""
    if not found:
        return []
    cancelled_key = queue.keys(name).cancelled
    pipe = queue.client.pipeline(transaction=False)
    for member, _ in found:
        task_id = payload_id(member)
        pipe.sismember(cancelled_key, raw_id(task_id) if task_id else b"")  # type: ignore[arg-type]
    replies: list[Any] = _replies(pipe)
    return [
        Entry(member, score, bool(flag))
        for (member, score), flag in zip(found, replies, strict=True)
    ]


def _replies(pipe: Any) -> list[Any]:
    """A pipeline's replies, an error (a key of the wrong type, written by hand) read
    as nothing there: a page shows the rest, never a crash."""
    return [None if isinstance(r, Exception) else r for r in pipe.execute(raise_on_error=False)]


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


def _listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text_id(member: object) -> str | None:
    if isinstance(member, bytes) and len(member) == RAW_ID_LENGTH:
        return member.hex()
    return None


def _score(value: object) -> float | None:
    if not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value) if 0 <= value < _LARGEST_SCORE else None
