"""Reading the metrics back: what the dashboard, ``rqueue monitor`` and Prometheus show.

Every function takes a :class:`~rqueue.store.queue.RedisQueue` and reads with one
round trip per call (a pipeline of the queue's own keys), so a page that charts a day
of one queue costs one round trip of 1,440 small reads. Nothing read is trusted
(see :mod:`rqueue.metrics.schema`): garbage in a metrics key reads as zero.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from rqueue.encoding.payload import decode
from rqueue.errors import InvalidPayload
from rqueue.metrics.schema import TaskCounts, parse_hash
from rqueue.store.keys import PLAIN_LEVEL
from rqueue.store.queue import QueueSize, RedisQueue

MINUTES_KEPT = 24 * 60
"""How far back the per-minute series go: each minute's hash expires after a day."""


@dataclass(frozen=True)
class MinutePoint:
    """One minute of one queue (or of one task on it), for a chart."""

    minute: int
    """Epoch seconds at the start of the minute (a multiple of 60), on the workers' clocks."""
    processed: int
    failed: int
    """Failed for good (to the failed list)."""
    retried: int
    """Failed and released for another attempt."""
    runtime_mean: float | None
    """Seconds; None when nothing ran that minute (so a chart can leave a gap)."""
    runtime_p50: float | None
    runtime_p95: float | None
    wait_mean: float | None
    """Seconds from dispatch to start, over first attempts that started this minute."""
    wait_p95: float | None

    @classmethod
    def of(cls, minute: int, counts: TaskCounts) -> MinutePoint:
        runtime, wait = counts.runtime, counts.wait
        return cls(
            minute,
            counts.processed,
            counts.failed,
            counts.retried,
            runtime.mean,
            runtime.quantile(0.5),
            runtime.quantile(0.95),
            wait.mean,
            wait.quantile(0.95),
        )


def queue_series(
    queue: RedisQueue,
    queue_name: str,
    minutes: int = 60,
    task: str | None = None,
    now: float | None = None,
) -> list[MinutePoint]:
    """The last ``minutes`` minutes (1 to 1,440) of ``queue_name``, oldest first, the
    current (partial) minute last; one point per minute, zeros where nothing ran.
    With ``task`` only that task's counts, else every task's summed."""
    if not 1 <= minutes <= MINUTES_KEPT:
        raise ValueError(f"minutes must be 1 to {MINUTES_KEPT}, got {minutes!r}")
    keys = queue.keys(queue_name)
    last = int((time.time() if now is None else now) // 60)
    wanted = range(last - minutes + 1, last + 1)
    pipe = queue.client.pipeline(transaction=False)
    for minute in wanted:
        pipe.hgetall(keys.metrics_minute(minute))
    points = []
    for minute, raw in zip(wanted, pipe.execute(raise_on_error=False), strict=True):
        by_task = parse_hash(raw) if isinstance(raw, dict) else {}
        if task is not None:
            counts = by_task.get(task, TaskCounts())
        else:
            counts = sum(by_task.values(), TaskCounts())
        points.append(MinutePoint.of(minute * 60, counts))
    return points


def totals(queue: RedisQueue, queue_name: str) -> dict[str, TaskCounts]:
    """All-time counters and histograms of ``queue_name``, by task name (as dispatched;
    show it escaped). Since the queue's metrics were first written, or last deleted."""
    return totals_of(queue, [queue_name])[queue_name]


def totals_of(queue: RedisQueue, queue_names: Sequence[str]) -> dict[str, dict[str, TaskCounts]]:
    """:func:`totals` of many queues, in one pipeline (a Prometheus scrape)."""
    pipe = queue.client.pipeline(transaction=False)
    for name in queue_names:
        pipe.hgetall(queue.keys(name).metrics)
    replies = pipe.execute(raise_on_error=False) if queue_names else []
    return {
        name: parse_hash(raw) if isinstance(raw, dict) else {}
        for name, raw in zip(queue_names, replies, strict=True)
    }


def oldest_wait(queue: RedisQueue, queue_name: str, now: float | None = None) -> float | None:
    """Seconds the task at the head of ``queue_name``'s ready list has waited: the real
    age of the next task a worker will take, read from its payload; None if none is
    ready, or the head is not a task rqueue can read. With priority levels in use, the
    oldest of the levels' heads: a lower level starved by a higher one shows its wait.

    Measured from its dispatch (``Job.dispatched_at``, the producer's clock), as a task
    dispatched to run now has waited. A task that was delayed (``later()``, a retry's
    backoff) only started waiting once it was due, and its payload does not say when
    that was, so for such a head the figure is too high by its delay: an alert errs
    towards firing, never towards staying quiet while tasks pile up (docs/monitoring.md).
    """
    return oldest_waits(queue, [queue_name], now)[queue_name]


def oldest_waits(
    queue: RedisQueue, queue_names: Sequence[str], now: float | None = None
) -> dict[str, float | None]:
    """:func:`oldest_wait` of many queues, in one pipeline (and one more for the queues
    with priority levels in use: the heads of their levels' lists)."""
    pipe = queue.client.pipeline(transaction=False)
    for name in queue_names:
        pipe.lindex(queue.keys(name).ready, 0)
        pipe.smembers(queue.keys(name).levels[10])
    replies = pipe.execute(raise_on_error=False) if queue_names else []
    heads = {name: [replies[2 * i]] for i, name in enumerate(queue_names)}
    members = {
        name: replies[2 * i + 1] if isinstance(replies[2 * i + 1], set) else set()
        for i, name in enumerate(queue_names)
    }
    leveled: list[tuple[str, str | bytes]] = [
        (name, queue.keys(name).levels[int(level)])
        for name, levels in members.items()
        for level in levels
        if level.isdigit() and int(level) < 10 and int(level) != PLAIN_LEVEL
    ]
    leveled += _group_lists(
        [name for name, levels in members.items() if str(PLAIN_LEVEL).encode() in levels], queue
    )
    if leveled:
        pipe = queue.client.pipeline(transaction=False)
        for _, key in leveled:
            pipe.lindex(key, 0)
        for (name, _), head in zip(leveled, pipe.execute(raise_on_error=False), strict=True):
            heads[name].append(head)
    moment = time.time() if now is None else now
    waits: dict[str, float | None] = {}
    for name, found in heads.items():
        ages = [age for head in found if (age := _age(head, moment)) is not None]
        waits[name] = max(ages, default=None)
    return waits


def _group_lists(names: Sequence[str], queue: RedisQueue) -> list[tuple[str, bytes]]:
    """The list of every fair group with tasks of each of ``names`` (one round trip)."""
    if not names:
        return []
    pipe = queue.client.pipeline(transaction=False)
    for name in names:
        pipe.zrange(queue.keys(name).turns, 0, -1)
    found = []
    for name, turns in zip(names, pipe.execute(raise_on_error=False), strict=True):
        prefix = queue.keys(name).turns.encode()
        found += (
            [(name, prefix + group) for group in turns if group] if isinstance(turns, list) else []
        )
    return found


SIZES_PER_CALL = 250
"""Queues read per round trip by :func:`queue_rows` (and ``rqueue size``): seven O(1)
reads each, then one more round trip for the head task of each (and one each for the
queues with priority levels in use)."""


@dataclass(frozen=True)
class QueueRow:
    size: QueueSize
    oldest_wait: float | None
    """Seconds the oldest ready task has waited (None: nothing ready)."""


def queue_rows(queue: RedisQueue, names: Sequence[str]) -> list[QueueRow]:
    """Each queue's sizes and oldest wait, :data:`SIZES_PER_CALL` queues at a time:
    what the dashboard's queues page, ``rqueue monitor`` and Prometheus show."""
    rows: list[QueueRow] = []
    for start in range(0, len(names), SIZES_PER_CALL):
        chunk = names[start : start + SIZES_PER_CALL]
        waits = oldest_waits(queue, chunk)
        rows += [QueueRow(size, waits[size.name]) for size in queue.sizes(chunk)]
    return rows


def _age(head: object, now: float) -> float | None:
    if not isinstance(head, bytes):
        return None
    try:
        dispatched = decode(head).dispatched_at
    except InvalidPayload:
        return None
    if dispatched <= 0:
        return None
    age = now - dispatched
    return max(0.0, age) if math.isfinite(age) else None
