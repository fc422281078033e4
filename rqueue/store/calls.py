"""One typed call builder per Lua script of :class:`~rqueue.store.queue.RedisQueue`.

Each function here returns the :class:`Call` of one script, its KEYS and ARGV in the
order the script's header (``lua/<name>.lua``) lists them, and is the only place that
lays them out: the roles of ``RedisQueue`` (``producer``, ``consumer``, ``admin``)
choose which call to make and on which connection, never a key's position. The
scripts' optional tails live here alone: push.lua's unique locks, the result keys of
tasks that keep their result (one shape, :func:`_keep`, read alike by ack.lua,
reserve.lua, fail.lua and push_once.lua), and reserve.lua's claims key and rate limit.

Each script that changes a task's state takes its queue's event stream among its
KEYS and, from a worker, the stream's cap (``Config.events``, ``rqueue work
--events``) among its ARGV, always: with events off the cap is 0 and the scripts add
nothing, so the hot path has no branch of its own for them. Producers' scripts take
the queue's events marker instead, set while a worker records events
(``store/live_events.py``).

Plain functions over lists, no object per call beyond the pair returned: push and
reserve are on the hot path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgpack

from rqueue.store.header import payload_id
from rqueue.store.keys import PLAIN_LEVEL, Lane, QueueKeys
from rqueue.store.wire import KeyOrArg

_STATUS_SLACK_MS = 24 * 3600 * 1000
"""A kept task's status record lasts its delay plus its keep time plus this: a day in
the queue before a worker takes it, after which its status reads ``unknown``."""


Call = tuple[list[str], list[KeyOrArg]]
"""A script's KEYS and ARGV: ``script(connection, *call)`` runs it. A plain pair, not a
named tuple: building one of those cost a third of a microsecond more per dispatch."""


class UniqueLock(NamedTuple):
    """The lock a unique task's payload takes as it is pushed (``@task(unique=)``)."""

    position: int
    """Its payload's place among those pushed with it, from 0."""
    key: str
    owner: str
    """The payload's task id: the only one that may release the lock."""
    lasts_ms: int


class Push(NamedTuple):
    """Payloads for one queue, pushed together (:meth:`RedisQueue.push_many`)."""

    queue: str
    delay_ms: int
    payloads: Sequence[bytes]
    kept: frozenset[str] = frozenset()
    """Ids of the payloads that keep their result: each gets a status record."""
    keep_ms: int = 0
    """The longest keep time among them."""
    locks: Sequence[UniqueLock] = ()
    """Unique tasks' locks: a payload whose lock is held is not pushed (push.lua)."""
    lane: Lane = PLAIN_LEVEL
    """The payloads' priority level (``@task(priority=)``) or group (``using(group=)``):
    5, the plain ready list, for tasks without either."""


class Kept(NamedTuple):
    """A finished task that keeps its result, acknowledged with its result record."""

    payload: bytes
    """The reserved bytes, as for a plain ack."""
    task_id: str
    record: bytes
    keep_ms: int


class Completing(NamedTuple):
    """The task whose completion pushes another (push_once.lua acknowledges it)."""

    keys: QueueKeys
    """Its own queue's keys."""
    reserved: bytes
    kept: Kept | None


def _arrival_keys(keys: QueueKeys) -> list[str]:
    """The keys a pushed task enters by: push.lua's and push_once.lua's KEYS[1..7]
    (its ``dispatched`` event, while a worker records events, among them)."""
    return [
        keys.ready,
        keys.delayed,
        keys.notify,
        keys.timer,
        keys.pending_ids,
        keys.events_on,
        keys.events,
    ]


def _keep(
    keys: QueueKeys,
    kept: Kept,
    script_keys: list[str],
    args: list[KeyOrArg],
    with_payload: bool = True,
) -> None:
    """Add a kept result to a call: its result key, done list, the queue's finished
    index, its dependents set and the queue's resolved and timer lists to KEYS
    (lua/keep_result.lua, lua/dependents.lua); its reserved payload (unless the script
    has it already, as fail.lua does), its result record and how long to keep it (ms)
    to ARGV."""
    script_keys += kept_keys(keys, kept.task_id)
    if with_payload:
        args.append(kept.payload)
    args += (kept.record, kept.keep_ms)


def kept_keys(keys: QueueKeys, task_id: str) -> tuple[str, ...]:
    """The six keys keep_result.lua writes a task's outcome with, in its order."""
    return (
        keys.result(task_id),
        keys.done(task_id),
        keys.finished,
        keys.dependents(task_id),
        keys.resolved,
        keys.timer,
    )


def _flag(value: bool) -> str:
    return "1" if value else "0"


def _packed(reserved: Sequence[bytes]) -> bytes:
    """Acks as one argument, a msgpack array (``cmsgpack.unpack`` in the script): packed
    in C, where a hundred arguments cost redis-py's packer a Python step each. As str
    items, not bin: the ``cmsgpack`` of Redis 6.2 and 7.0 refuses bin."""
    packed: bytes = msgpack.packb(reserved, use_bin_type=False)
    return packed


def push(keys: QueueKeys, push: Push) -> Call:
    """push.lua, for one chunk of signed payloads: locks (four values each) before the
    payloads, the unique hash before the kept tasks' result keys."""
    delay_ms, locks, lane = push.delay_ms, push.locks, push.lane
    script_keys = _arrival_keys(keys)
    status_ms = max(0, delay_ms) + push.keep_ms + _STATUS_SLACK_MS
    args: list[KeyOrArg] = [delay_ms, status_ms, len(locks)]
    if locks:
        script_keys.append(keys.unique)
        for lock in locks:
            args += (lock.position + 1, lock.key, lock.owner, lock.lasts_ms)
    if isinstance(lane, str):  # a group's: its list, and the turns it joins
        script_keys[0] = keys.group(lane)
        script_keys += (keys.levels[10], keys.levels[11], keys.turns)
        args[2] = f"{len(locks)}:{PLAIN_LEVEL}:{lane}"
    elif lane != PLAIN_LEVEL:  # a plain push's call is as it always was
        levels = keys.levels
        script_keys[0] = levels[lane]
        script_keys += (levels[10], levels[11])
        args[2] = f"{len(locks)}:{lane}"
    if push.kept:
        ids = (payload_id(payload) for payload in push.payloads)
        script_keys += (keys.result(i) for i in ids if i is not None and i in push.kept)
    args += push.payloads
    return script_keys, args


def push_once(
    keys: QueueKeys,
    signed: bytes,
    delay_ms: int,
    marker_ms: int,
    kept: bool,
    completing: Completing | None,
    first: bool,
    events: int,
) -> Call:
    """push_once.lua: the payload's marker (and its result key if ``kept``), then the
    completing task's reserved set (and its result keys if it keeps its result) and
    its event stream, for a worker recording ``events`` (its cap; 0: none)."""
    task_id = payload_id(signed) or ""
    script_keys = _arrival_keys(keys)
    script_keys.append(keys.once(task_id))
    if kept:
        script_keys.append(keys.result(task_id))
    args: list[KeyOrArg] = [delay_ms, marker_ms, signed, _flag(kept)]
    if completing is None:
        args += ("", "", 0)
    else:
        script_keys.append(completing.keys.reserved)
        if completing.kept is None:
            args += (completing.reserved, b"", 0)
        else:
            done = completing.kept._replace(payload=completing.reserved)
            _keep(completing.keys, done, script_keys, args)
        script_keys.append(completing.keys.events)
    script_keys += keys.levels
    args += (_flag(first), events)
    return script_keys, args


def debounce(
    keys: QueueKeys, signed: bytes, replacing: bool, key: str, timing: tuple[int, int], keep_ms: int
) -> Call:
    """debounce.lua: the arrival keys and the key's entry, and the payload's result key
    if it keeps its result; ``timing`` is (debounce, debounce_max or 0) in ms."""
    wait_ms, cap_ms = timing
    script_keys = _arrival_keys(keys)
    script_keys += (keys.debounce(key), keys.levels[11])
    if keep_ms:
        script_keys.append(keys.result(payload_id(signed) or ""))
    status_ms = wait_ms + keep_ms + _STATUS_SLACK_MS  # never due later than a debounce on
    return script_keys, [signed, _flag(replacing), wait_ms, cap_ms, status_ms]


def release_unique(keys: QueueKeys, task_id: str) -> Call:
    """release_unique.lua: the queue's unique locks, the task's id."""
    return [keys.unique], [task_id]


def reserve(
    keys: QueueKeys,
    count: int,
    default_timeout_ms: int,
    grace_ms: int,
    margin_ms: int,
    share: int,
    ack: Sequence[bytes],
    claims: str | None,
    kept: Sequence[Kept],
    rate: tuple[int, int] | None,
    events: int,
    leveled: bool = False,
    unconfirmed: bool = False,
) -> Call:
    """reserve.lua: seven fixed keys and the priority levels set (and, if ``leveled``,
    the levels' ten lists and the groups' turns), then the claims key, the kept tasks'
    result keys and the rate key, each only if used (the script tells them apart by
    count). ``unconfirmed``: each reservation lasts the margin alone until renew.lua
    confirms it, and gets its attempt back if it expires first."""
    script_keys = [
        keys.ready,
        keys.reserved,
        keys.notify,
        keys.pending_ids,
        keys.cancelled,
        keys.paused,
        keys.events,
        keys.levels[10],
    ]
    if leveled:
        script_keys += (*keys.levels[:10], keys.turns)
    if claims is not None:
        script_keys.append(keys.claims(claims))
    args: list[KeyOrArg] = [count, default_timeout_ms, grace_ms, margin_ms, max(1, share)]
    args += (_packed(ack), len(kept), events, 1 if unconfirmed else 0)
    for done in kept:
        _keep(keys, done, script_keys, args)
    if rate is not None:
        limit, period_ms = rate
        script_keys.append(keys.rate)
        args += (period_ms, limit)
    return script_keys, args


def renew(keys: QueueKeys, reserved: bytes, lasting_ms: int) -> Call:
    """renew.lua: the reserved set; the payload and how long it lasts from now."""
    return [keys.reserved], [reserved, lasting_ms]


def checkpoint(
    keys: QueueKeys, task_id: str, saved: bytes, keep_ms: int, reserved: bytes, lasting_ms: int
) -> Call:
    """checkpoint.lua: the task's checkpoint and the reserved set; the checkpoint's
    bytes ('': forget it), how long it lasts, the reserved payload ('' when forgetting)
    and how long its reservation lasts once renewed (0: not renewed)."""
    return [keys.checkpoint(task_id), keys.reserved], [saved, keep_ms, reserved, lasting_ms]


def ack(keys: QueueKeys, reserved: Sequence[bytes], kept: Sequence[Kept], events: int) -> Call:
    """ack.lua: the plain acks, then the kept ones with their result keys."""
    script_keys = [keys.reserved, keys.events]
    args: list[KeyOrArg] = [events, _packed(reserved)]
    for done in kept:
        _keep(keys, done, script_keys, args)
    return script_keys, args


def release(
    keys: QueueKeys,
    reserved: Sequence[bytes],
    delay_ms: int,
    unstarted: bool,
    claims: str | None,
    events: int,
    error: str,
) -> Call:
    """release.lua: nine fixed keys and the priority levels', and the child's claims
    key if given; ``error`` (the failed attempt's error type, or '') makes each a
    ``retried`` event."""
    script_keys = [keys.reserved, keys.delayed, keys.ready, keys.notify, keys.timer]
    script_keys += (keys.pending_ids, keys.events, keys.cancelling, keys.cancelled)
    script_keys += keys.levels
    if claims is not None:
        script_keys.append(keys.claims(claims))
    return script_keys, [delay_ms, _flag(unstarted), events, error, *reserved]


def fail(
    keys: QueueKeys, reserved: bytes, record: bytes, force: bool, kept: Kept | None, events: int
) -> Call:
    """fail.lua: the failed list and its lookup, the event stream, the cancel requests,
    and the result keys if ``kept``."""
    script_keys = [keys.reserved, keys.failed, keys.failed_lookup, keys.events, keys.cancelling]
    args: list[KeyOrArg] = [reserved, record, _flag(force), events]
    if kept is not None:
        _keep(keys, kept, script_keys, args, with_payload=False)
    return script_keys, args


def cancel(keys: QueueKeys, task_id: str, raw: bytes, fail: bool) -> Call:
    """cancel.lua: the task's pending and kept-result keys, then the in-flight ones."""
    script_keys = [keys.pending_ids, keys.cancelled, keys.result(task_id), keys.done(task_id)]
    script_keys += (keys.unique, keys.events_on, keys.events, keys.reserved, keys.cancelling)
    script_keys += (keys.timer, keys.dependents(task_id), keys.resolved)
    return script_keys, [task_id, raw, _flag(fail)]


def settle_cancelled(
    keys: QueueKeys, reserved: bytes, task_id: str, record: bytes, fail: bool, events: int
) -> Call:
    """settle_cancelled.lua: the request, the failed list, the kept result, the lock."""
    script_keys = [keys.reserved, keys.cancelling, keys.failed, keys.failed_lookup]
    script_keys += (keys.result(task_id), keys.done(task_id), keys.unique, keys.events)
    script_keys += (keys.dependents(task_id), keys.resolved, keys.timer)
    return script_keys, [reserved, record, events, _flag(fail), task_id]


def count_exception(keys: QueueKeys, task_id: str, keep_ms: int) -> Call:
    """count_exception.lua: the task's counter, how long it lasts."""
    return [keys.exceptions(task_id)], [keep_ms]


def migrate(keys: QueueKeys, limit: int, events: int, aging_ms: int = 0) -> Call:
    """migrate.lua: delayed and reserved into ready (each onto its priority level's
    list); at most ``limit`` from each. A parent recording ``events`` (the cap) renews
    the queue's events marker. It counts the notices in the resolved list too, and
    with ``aging_ms`` promotes a waiting level's oldest task (``rqueue work --aging``)."""
    script_keys = [keys.delayed, keys.reserved, keys.ready, keys.notify]
    script_keys += (keys.events_on, keys.events, keys.resolved, *keys.levels)
    return script_keys, [limit, events, aging_ms]


def pause(keys: QueueKeys, paused: bool) -> Call:
    """pause.lua: the paused flag, and ready, notify and the priority levels set to
    wake workers on resume."""
    return [keys.paused, keys.ready, keys.notify, keys.levels[10]], [_flag(paused)]


def clear(keys: QueueKeys) -> Call:
    """clear.lua: every key of the queue's pending tasks, the priority levels' too; the
    failed list stays."""
    pending = [keys.ready, keys.delayed, keys.reserved, keys.notify, keys.timer]
    pending += (keys.pending_ids, keys.cancelled, keys.unique, keys.waiting)
    return [*pending, *keys.levels], []
