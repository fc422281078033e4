"""How counts are laid out in a metrics hash, shared by the writer and the readers.

A queue's metrics hashes (``QueueKeys.metrics`` for all time, ``metrics_minute`` for
each minute) map each task name to its counts, packed as one msgpack array of
:data:`WIDTH` numbers: processed, failed, retried, the runtime
histogram's buckets and sum, the wait histogram's buckets and sum. One field per task,
not one per counter: the task name is stored once a minute instead of twenty times,
a fifth of the memory (docs/monitoring.md), and ``metrics_flush.lua`` adds a flush to
it in one read and one write.

Everything read back is checked: a value that is not such an array, or holds a
count that is not a whole number or a sum that is negative, infinite or NaN, reads
as nothing for that task, never raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgpack

BOUNDS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""Upper bounds (seconds) of the runtime and wait histograms' buckets, as Prometheus's
``le``; one more bucket, +Inf, holds the rest. Fixed, so hashes of every worker and
version add up."""
EDGES = (*BOUNDS, math.inf)
"""Every bucket's upper bound, +Inf last."""
BUCKETS = len(EDGES)

RUNTIME_AT = 3
"""Where the runtime histogram's buckets start, after processed, failed and retried;
its sum follows them."""
WAIT_AT = RUNTIME_AT + BUCKETS + 1
"""Where the wait histogram's buckets start; its sum follows them, last."""
WIDTH = WAIT_AT + BUCKETS + 1
"""How many numbers a task's packed counts hold."""
_MAX_VALUE = 1 << 24
"""Longest packed value read: WIDTH numbers take a few hundred bytes at most."""


@dataclass(frozen=True)
class Histogram:
    """Observations by bucket (not cumulative; the last is +Inf), their sum and count."""

    buckets: tuple[int, ...] = (0,) * BUCKETS
    sum: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.buckets)

    @property
    def mean(self) -> float | None:
        count = self.count
        return self.sum / count if count else None

    def cumulative(self) -> list[tuple[float, int]]:
        """``(le, count of observations <= le)`` per bucket, +Inf last: Prometheus's form."""
        running, pairs = 0, []
        for bound, count in zip(EDGES, self.buckets, strict=True):
            running += count
            pairs.append((bound, running))
        return pairs

    def quantile(self, q: float) -> float | None:
        """An estimate of the ``q`` quantile (0..1), interpolated inside its bucket as
        Prometheus's ``histogram_quantile`` does; None without observations. One in the
        +Inf bucket reads as the last finite bound (60 s): "at least a minute"."""
        total = self.count
        if not total:
            return None
        rank = q * total
        below, lower = 0, 0.0
        for bound, count in zip(EDGES, self.buckets, strict=True):
            if count and below + count >= rank:
                if math.isinf(bound):
                    return BOUNDS[-1]
                return lower + (bound - lower) * max(0.0, rank - below) / count
            below += count
            lower = bound  # past +Inf nothing reads it
        return BOUNDS[-1]

    def __add__(self, other: Histogram) -> Histogram:
        buckets = tuple(a + b for a, b in zip(self.buckets, other.buckets, strict=True))
        return Histogram(buckets, self.sum + other.sum)


@dataclass(frozen=True)
class TaskCounts:
    """One task's counters over some span (a minute, or all time)."""

    processed: int = 0
    failed: int = 0
    retried: int = 0
    runtime: Histogram = Histogram()
    """Seconds each attempt ran, whatever its outcome."""
    wait: Histogram = Histogram()
    """Seconds from dispatch to the start of each first attempt."""

    def __add__(self, other: TaskCounts) -> TaskCounts:
        return TaskCounts(
            self.processed + other.processed,
            self.failed + other.failed,
            self.retried + other.retried,
            self.runtime + other.runtime,
            self.wait + other.wait,
        )


def parse_hash(raw: Mapping[Any, Any]) -> dict[str, TaskCounts]:
    """A metrics hash as read from Redis -> task name -> its counts; garbage skipped."""
    parsed = {}
    for raw_task, packed in raw.items():
        if not isinstance(raw_task, bytes) or not isinstance(packed, bytes):
            continue
        counts = _unpacked(packed)
        if counts is not None:
            parsed[raw_task.decode("utf-8", "replace")] = counts
    return parsed


def _unpacked(packed: bytes) -> TaskCounts | None:
    if len(packed) > _MAX_VALUE:
        return None
    try:
        numbers = msgpack.unpackb(packed, strict_map_key=False)
    except Exception:  # any garbage: msgpack raises several kinds
        return None
    if not isinstance(numbers, list) or len(numbers) != WIDTH:
        return None
    if not all(_number(n) for n in numbers):
        return None
    sums = (RUNTIME_AT + BUCKETS, WAIT_AT + BUCKETS)
    if not all(float(n).is_integer() for i, n in enumerate(numbers) if i not in sums):
        return None
    whole = [int(n) for n in numbers]

    def histogram(first: int) -> Histogram:
        return Histogram(tuple(whole[first : first + BUCKETS]), float(numbers[first + BUCKETS]))

    return TaskCounts(whole[0], whole[1], whole[2], histogram(RUNTIME_AT), histogram(WAIT_AT))


def _number(value: object) -> bool:
    """A finite number from 0 to 2**53 (a double counts exactly up to there)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return 0 <= value <= 2**53  # NaN fails both comparisons, infinity the second
