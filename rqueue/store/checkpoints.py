"""An iterable task's checkpoint in Redis: how far it has come, written by
checkpoint.lua, read back checked.

An iterable task (``@task(iterable=True)``, ``tasks/iterable.py``) yields a cursor
after each item; its worker keeps the latest here, at most about once a second and
at every stop, beside the queue's keys (``queues:<q>:checkpoint:<id>``, in the
queue's hash slot), and the task's next attempt resumes from it. The value is one
msgpack array, ``[cursor, items done, total items or nil]``, so progress survives a
resume too.

The script writes only while the writer still holds the task's reservation, and
renews that reservation in the same step: a task that checkpoints is never taken for
a lost one however long it runs, and a worker that lost it (its reservation ran out,
the task runs elsewhere) learns it at its next checkpoint and stops.

What is read back comes from Redis, so it is believed only once checked: anything
but an array rqueue could have written (a cursor of plain msgpack values, counts
that are non-negative integers, at most :data:`MAX_BYTES`) is an
:class:`~rqueue.errors.InvalidCursor` naming the key, never a crash or a value of a
type the task did not yield.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import msgpack
import redis

from rqueue.errors import InvalidCursor
from rqueue.store import calls
from rqueue.store.queue import RedisQueue

KEEP_MS = 7 * 24 * 3600 * 1000
"""How long a checkpoint lasts after it was written: a task waiting this long for its
next attempt (a long backoff, a paused queue) starts over."""
MAX_BYTES = 64 * 1024
"""The largest checkpoint: a cursor is a position (an id, a key, a page token), not data."""
_DEPTH = 16
"""Nesting a cursor may have (lists and maps in lists and maps)."""


class Checkpoint(NamedTuple):
    """How far an iterable task has come."""

    cursor: object
    """The last cursor it yielded: its items up to this one are done."""
    done: int
    """Items done, over all its attempts."""
    total: int | None
    """Items it said it has (``Total``), or None: unknown."""


def encode(checkpoint: Checkpoint) -> bytes:
    """The checkpoint's bytes; InvalidCursor if its cursor is not plain msgpack data."""
    problem = _not_plain(checkpoint.cursor, _DEPTH)
    if problem is None:
        try:
            encoded: bytes = msgpack.packb(list(checkpoint), use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as exc:
            problem = str(exc)
        else:
            if len(encoded) <= MAX_BYTES:
                return encoded
            problem = f"{len(encoded)} bytes encoded, more than {MAX_BYTES}"
    raise InvalidCursor(
        f"an iterable task yielded a cursor that cannot be checkpointed ({problem}): yield "
        "None, a bool, an int, a finite float, a str, bytes, or lists and dicts of them "
        f"(str keys), at most {MAX_BYTES} bytes encoded; got {repr(checkpoint.cursor)[:80]}"
    )


def decode(raw: bytes, where: str) -> Checkpoint:
    """A checkpoint read back from Redis, checked; InvalidCursor naming ``where`` (its
    key) if it is not one rqueue could have written."""
    problem = "more than the largest checkpoint" if len(raw) > MAX_BYTES else None
    value: object = None
    if problem is None:
        try:
            value = msgpack.unpackb(raw, raw=False, strict_map_key=True, timestamp=0)
        except Exception as exc:  # msgpack raises many kinds on garbage
            problem = f"not msgpack: {type(exc).__name__}"
    if problem is None:
        problem = _not_checkpoint(value)
    if problem is not None:
        raise InvalidCursor(
            f"the checkpoint at {where!r} is not one rqueue wrote ({problem}); the "
            "task cannot resume from it: delete the key to start the task over"
        )
    assert isinstance(value, list)
    return Checkpoint(value[0], value[1], value[2])


def _not_checkpoint(value: object) -> str | None:
    """Why a decoded value is not ``[cursor, done, total]``, or None."""
    if not isinstance(value, list) or len(value) != 3:
        return "not an array of 3"
    _, done, total = value
    if type(done) is not int or done < 0:
        return "its count of items done is not a non-negative integer"
    if total is not None and (type(total) is not int or total < 0):
        return "its total is not nil or a non-negative integer"
    return _not_plain(value[0], _DEPTH)


def _not_plain(value: object, depth: int) -> str | None:
    """Why ``value`` is not a cursor (plain msgpack data, finite, nested at most
    ``depth`` deep), or None."""
    if value is None or type(value) in (bool, int, str, bytes):
        return None
    if type(value) is float:
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    if depth <= 0:
        return "nested too deep"
    if type(value) in (list, tuple):
        for item in value:  # type: ignore[attr-defined]
            problem = _not_plain(item, depth - 1)
            if problem is not None:
                return problem
        return None
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                return f"a map key {key!r} is not a str"
            problem = _not_plain(item, depth - 1)
            if problem is not None:
                return problem
        return None
    return f"a {type(value).__name__} is not plain msgpack data"


def read(queue: RedisQueue, queue_name: str, task_id: str) -> Checkpoint | None:
    """The task's checkpoint (None: none kept); InvalidCursor if Redis holds garbage."""
    key = queue.keys(queue_name).checkpoint(task_id)
    try:
        raw = queue.client.get(key)
    except redis.ResponseError:  # not a string: not a checkpoint checkpoint.lua wrote
        raise InvalidCursor(
            f"the checkpoint at {key!r} is not one rqueue wrote (not a string); the "
            "task cannot resume from it: delete the key to start the task over"
        ) from None
    return None if raw is None else decode(raw, key)  # type: ignore[arg-type]


def write(
    queue: RedisQueue,
    queue_name: str,
    task_id: str,
    saved: bytes,
    keep_ms: int,
    reserved: bytes,
    lasting_ms: int,
) -> bool:
    """Keep an encoded checkpoint for ``keep_ms`` while ``reserved`` is still reserved,
    renewing its reservation for ``lasting_ms`` (0: not renewed); False if it is not
    reserved any more (nothing written)."""
    keys = queue.keys(queue_name)
    call = calls.checkpoint(keys, task_id, saved, keep_ms, reserved, lasting_ms)
    return bool(queue.scripts.checkpoint(queue.wire, *call))


def forget(queue: RedisQueue, queue_name: str, task_id: str) -> None:
    """Delete the task's checkpoint: it finished for good (failed, cancelled)."""
    call = calls.checkpoint(queue.keys(queue_name), task_id, b"", 0, b"", 0)
    queue.scripts.checkpoint(queue.wire, *call)
