"""A worker child's counters: recorded in memory per task, flushed to Redis per second.

Recording a success appends its runtime (and the wait of a first attempt) to two
lists of its (queue, task): one clock read, no count to bump, and no Redis call,
about as cheap as Python allows, because the empty-task hot path must stay within 5%
of its rate with metrics off. The histograms are built at flush time, in C (a min and
a max, and a sort only when the values span buckets), so their cost per task is a
share of one sort at most.

At most once per :data:`FLUSH_INTERVAL`, and when the child stops, :meth:`Collector.flush`
sends each queue's counts in one ``metrics_flush.lua`` call, on the child's ordinary
client (the lean connection may have a reserve call in flight), so a busy child adds
about one round trip per queue a second, however many tasks it runs. The counts of one
interval go to the minute the interval began in: a minute's figures are off by at
most the second that straddles its start. The check for a due flush is made as a task
ends and as the child's loop turns (no clock read is added while a task starts), so a
child whose next task runs for minutes sends what came before it only when it ends,
still counted in the minute it happened.

If Redis is away the counts wait for the next flush; if Redis refuses the call
outright (a script error, ``OOM``) that queue's counts are dropped and the refusal
logged once: metrics never hold up, nor fail, a task.

Minutes are the worker's clock's (``time.time() // 60``); so are the wait times,
against the producer's ``dispatched_at``: hosts should keep their clocks in sync.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left, bisect_right

import redis

from rqueue.encoding.payload import Job
from rqueue.metrics.schema import EDGES, WIDTH
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS
from rqueue.store.scripts import LuaScript
from rqueue.tasks.names import is_internal

log = logging.getLogger("rqueue.worker")

FLUSH_INTERVAL = 1.0
"""Seconds between flushes: how stale the counts in Redis are at most (while busy)."""
MINUTE_TTL = 24 * 3600 + 60
"""Seconds a minute's hash lives after its last flush."""
UNREGISTERED = "(unregistered)"
"""The task name counted for a payload naming a task this worker does not know: its
name is whatever the payload said, and counting each would let one producer grow the
metrics (and every Prometheus series) without bound."""

_SCRIPT = LuaScript.load("metrics_flush")
_clock = time.time
_Field = str | int | float


class _Series:
    """One (queue, task)'s outcomes since the last flush."""

    __slots__ = ("others", "runtimes", "waits")

    def __init__(self) -> None:
        self.others = [0, 0, 0]
        """Failed, retried, and how many of those ran (have a runtime): a success is
        counted by its runtime alone, one operation less on the hot path."""
        self.runtimes: list[float] = []
        self.waits: list[float] = []

    def counts(self) -> tuple[int, int, int]:
        """Processed, failed, retried."""
        failed, retried, ran = self.others
        return len(self.runtimes) - ran, failed, retried


class Collector:
    """One child's counts since its last flush, by (queue, task)."""

    def __init__(self, store: RedisQueue) -> None:
        self.store = store
        self._series: dict[tuple[str, str], _Series] = {}
        self._minute = int(_clock() // 60)
        self._due = _clock() + FLUSH_INTERVAL
        self._refused_logged = False

    # -- recording (the hot path) ---------------------------------------------------

    def succeeded(self, queue: str, job: Job, duration: float) -> None:
        now = _clock()
        if now >= self._due:
            self.flush()
        series = self._series.get((queue, job.task))
        if series is None:
            series = self._series[(queue, job.task)] = _Series()
        series.runtimes.append(duration)
        if job.attempts == 1 and job.dispatched_at:  # a retry's "wait" is its backoff
            series.waits.append(now - duration - job.dispatched_at)

    def retried(self, queue: str, task: str, job: Job, runtime: float | None) -> None:
        """An attempt failed and the task goes back for another (``task``: the name
        to count it under, see :data:`UNREGISTERED`; ``runtime`` None if the parent
        settled it, its child dead)."""
        self._other(queue, task, 1, job, runtime)

    def failed(self, queue: str, task: str, job: Job | None, runtime: float | None) -> None:
        """A task failed for good; ``runtime`` None if it never ran (refused)."""
        self._other(queue, task, 0, job, runtime)

    def _other(
        self, queue: str, task: str, outcome: int, job: Job | None, runtime: float | None
    ) -> None:
        now = _clock()
        if now >= self._due:
            self.flush()
        series = self._series.get((queue, task))
        if series is None:
            series = self._series[(queue, task)] = _Series()
        series.others[outcome] += 1
        if runtime is not None:
            series.others[2] += 1
            series.runtimes.append(runtime)
            if job is not None and job.attempts == 1 and job.dispatched_at:
                series.waits.append(now - runtime - job.dispatched_at)

    # -- flushing -----------------------------------------------------------------

    def flush_if_due(self) -> None:
        """Flush if the interval passed (an idle child calls this between waits)."""
        if _clock() >= self._due:
            self.flush()

    def flush(self) -> None:
        """Send every count, one script call per queue; never raises."""
        minute = self._minute
        now = _clock()
        self._minute, self._due = int(now // 60), now + FLUSH_INTERVAL
        by_queue: dict[str, list[tuple[str, _Series]]] = {}
        for (queue, task), series in self._series.items():
            if not is_internal(task):  # rqueue's own (a parent's failure report): not work
                by_queue.setdefault(queue, []).append((task, series))
        self._series = {}
        for queue, tasks in by_queue.items():
            try:
                self._send(queue, minute, tasks)
            except REDIS_ERRORS:  # kept, and sent with the next flush's minute
                self._series.update({(queue, task): series for task, series in tasks})
            except redis.ResponseError as exc:
                if not self._refused_logged:
                    self._refused_logged = True
                    log.error("metrics of queue %s: Redis refused them (%s); dropped", queue, exc)

    def _send(self, queue: str, minute: int, tasks: list[tuple[str, _Series]]) -> None:
        keys = self.store.keys(queue)
        args: list[_Field] = [MINUTE_TTL, WIDTH]
        for task, series in tasks:
            args += [task, *series.counts()]
            for values in (series.runtimes, series.waits):
                buckets, total = _histogram(values)
                args += buckets
                args.append(repr(total))
        _SCRIPT(self.store.client, [keys.metrics, keys.metrics_minute(minute)], args)


def _histogram(values: list[float]) -> tuple[list[int], float]:
    """How many of ``values`` fall in each bucket, and their sum (a negative wait, from
    clocks out of step, counts as none, in the first bucket). Done in C: a min and a
    max, then, only if the values span more than one bucket, a sort in place and one
    bisection per bound. ``values`` is the series' own list, about to be dropped."""
    counts = [0] * len(EDGES)
    if not values:
        return counts, 0.0
    low, high = min(values), max(values)
    first = bisect_left(EDGES, low)
    if first == bisect_left(EDGES, high):
        counts[first] = len(values)
    else:
        values.sort()
        below = 0
        for bucket, bound in enumerate(EDGES):
            upto = bisect_right(values, bound, below)
            counts[bucket] = upto - below
            below = upto
    total = sum(values)
    if low < 0:
        total -= sum(v for v in values if v < 0)
    return counts, total


class NoMetrics:
    """What a worker records into with ``--no-metrics``: nothing, at no cost."""

    def succeeded(self, queue: str, job: Job, duration: float) -> None:
        pass

    def retried(self, queue: str, task: str, job: Job, runtime: float | None) -> None:
        pass

    def failed(self, queue: str, task: str, job: Job | None, runtime: float | None) -> None:
        pass

    def flush_if_due(self) -> None:
        pass

    def flush(self) -> None:
        pass
