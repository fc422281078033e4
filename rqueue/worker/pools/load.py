"""A pool's queues' load, measured for one scaling step (``scaling.py`` decides on it).

Two round trips for all the queues of a pool: their sizes and oldest waits
(``metrics.read.queue_rows``, what the dashboard shows) and their all-time metrics, for
each queue's mean runtime. A paused queue's tasks cannot be worked: it has no load.
"""

from __future__ import annotations

from collections.abc import Sequence

from rqueue.metrics.read import queue_rows, totals_of
from rqueue.metrics.schema import TaskCounts
from rqueue.store.queue import RedisQueue
from rqueue.worker.pools.scaling import QueueLoad


def measure(store: RedisQueue, queues: Sequence[str]) -> dict[str, QueueLoad]:
    """Each of ``queues``' load now."""
    totals = totals_of(store, queues)
    loads = {}
    for row in queue_rows(store, queues):
        size = row.size
        runtime = sum(totals[size.name].values(), TaskCounts()).runtime.mean
        if size.paused:
            loads[size.name] = QueueLoad(size.name, 0, size.reserved, None, runtime)
        else:
            loads[size.name] = QueueLoad(
                size.name, size.ready, size.reserved, row.oldest_wait, runtime
            )
    return loads
