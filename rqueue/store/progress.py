"""A running task's progress in Redis: written by progress.lua, read back checked.

A task reports progress from its run (``current_job().progress(0.4, "4 of 10")``,
``tasks/progress.py``); a worker writes it here, one round trip per report, to a hash
beside the queue's keys (``queues:<q>:progress:<id>``, in the queue's hash slot) that
expires a day after the latest report, so a task that never finishes leaves nothing
behind. With ``rqueue work --events`` the same script adds a ``progress`` event to
the queue's stream (``store/live_events.py``).

A batch's progress (``Batch.progress()``) adds up its members': each finished one
counts 1, each other one its latest fraction (:func:`unfinished_progress`).

The hash is read from Redis, so anything in it is believed only once checked: a
fraction that is not a finite number from 0 to 1, or a message that is not text, reads
as no progress at all rather than as a crash.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import redis

from rqueue.errors import InvalidProgress
from rqueue.store.header import raw_id
from rqueue.store.keys import BatchKeys
from rqueue.store.queue import RedisQueue

KEEP_MS = 24 * 3600 * 1000
"""How long a progress record lasts after its latest report."""
MAX_MESSAGE = 200
"""Characters a progress message may have: a line for a terminal, not a log."""


class Progress(NamedTuple):
    """How far a task has come, as it last said."""

    fraction: float
    """From 0 (nothing done) to 1 (all done)."""
    message: str | None
    at: float
    """When it was reported: epoch seconds, by Redis's clock."""


def checked(fraction: object, message: object) -> tuple[float, str | None]:
    """``(fraction, message)`` if they are a finite number from 0 to 1 and None or a str
    of at most :data:`MAX_MESSAGE` characters; InvalidProgress naming the one at fault."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not 0.0 <= fraction <= 1.0  # false for NaN too
    ):
        raise InvalidProgress(
            f"progress(): fraction must be a number from 0 to 1 (0.25 for a quarter), "
            f"not {fraction!r}"
        )
    if message is not None and (not isinstance(message, str) or len(message) > MAX_MESSAGE):
        got = f"{len(message)} characters" if isinstance(message, str) else repr(message)
        raise InvalidProgress(
            f"progress(): message must be None or a str of at most {MAX_MESSAGE} characters, "
            f"not {got}"
        )
    return float(fraction), message


def write(
    queue: RedisQueue,
    queue_name: str,
    task_id: str,
    task: str,
    attempt: int,
    fraction: float,
    message: str | None,
) -> Progress:
    """Record a checked report (progress.lua); with events on, its event too."""
    keys = queue.keys(queue_name)
    script_keys = (keys.progress(task_id), keys.events)
    events, stored_id = queue.config.events, raw_id(task_id)
    args = (repr(fraction), message or "", KEEP_MS, events, stored_id, task, attempt)
    now_ms = queue.scripts.progress(queue.wire, script_keys, args)
    return Progress(fraction, message, int(now_ms) / 1000)


def read(queue: RedisQueue, queue_name: str, task_id: str) -> Progress | None:
    """The task's latest progress, or None (none reported, expired, or not a record)."""
    key = queue.keys(queue_name).progress(task_id)
    try:
        raw = queue.client.hmget(key, "fraction", "message", "at")
    except redis.ResponseError:  # not a hash: not a record progress.lua wrote
        return None
    return parse(raw)  # type: ignore[arg-type]


def parse(raw: list[bytes | None]) -> Progress | None:
    """A progress record's three fields as Redis returned them, checked."""
    fraction, message, at = (_number(raw[0]), raw[1], _number(raw[2]))
    if fraction is None or at is None or not 0.0 <= fraction <= 1.0 or message is None:
        return None
    text = message.decode("utf-8", "replace")[:MAX_MESSAGE]
    return Progress(fraction, text or None, at / 1000)


def _number(raw: bytes | None) -> float | None:
    """A finite number from Redis's bytes, or None."""
    try:
        value = float(raw) if raw is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


MOST_MEMBERS = 10_000
"""Members of a batch whose progress a batch's aggregate reads at most (the first ones)."""


def unfinished_progress(
    queue: RedisQueue, batch: BatchKeys, member_ids: Sequence[str], queues: Sequence[str]
) -> float:
    """The sum of the latest fractions of a batch's members that have not finished
    (none of its succeeded, failed and skipped bitmaps has their index): what the
    members still running add to its finished ones. One round trip for the bitmaps,
    one per queue for the members' records; what does not read counts 0."""
    pipe = queue.client.pipeline(transaction=False)
    for key in (batch.succeeded, batch.failed, batch.skipped):
        pipe.get(key)
    raws: list[object] = pipe.execute(raise_on_error=False)
    done = bytearray()
    for raw in raws:  # Redis's bit 0 is the first byte's highest bit
        bitmap = raw if isinstance(raw, bytes) else b""  # a key of another type: none set
        done.extend(bytes(max(0, len(bitmap) - len(done))))
        for at, byte in enumerate(bitmap):
            done[at] |= byte
    running = [
        task_id
        for index, task_id in enumerate(member_ids)
        if index // 8 >= len(done) or not done[index // 8] & (0x80 >> index % 8)
    ]
    fractions = dict.fromkeys(running, 0.0)
    for name in queues:
        keys = queue.keys(name)
        pipe = queue.client.pipeline(transaction=False)
        for task_id in running:
            pipe.hget(keys.progress(task_id), "fraction")
        for task_id, raw in zip(running, pipe.execute(raise_on_error=False), strict=True):
            fraction = _number(raw) if isinstance(raw, bytes) else None
            if fraction is not None and 0.0 <= fraction <= 1.0:
                fractions[task_id] = max(fractions[task_id], fraction)
    return sum(fractions.values())
