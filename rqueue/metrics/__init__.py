"""Metrics: what the workers did, kept in Redis, and who the workers are.

- ``schema``: the layout of a metrics hash (task name -> its counts and histograms,
  packed) and reading one back, garbage skipped.
- ``collector``: a worker child's counts, kept in memory per queue and task, and
  flushed at most once a second by one script call per queue
  (``store/lua/metrics_flush.lua``): recording a task costs no round trip.
- ``read``: the reader API: :func:`queue_series` (per minute, a day back),
  :func:`totals` (all time), :func:`oldest_wait`.
- ``registry``: the worker registry: a parent's :class:`Heartbeat`, and
  :func:`list_workers`.
- ``wait_limits``: :class:`WaitLimits`, how long each queue's oldest ready task may
  wait before ``rqueue monitor`` and the dashboard flag it (``--wait``).
- ``prometheus``: a prometheus_client collector reading all of it on scrape
  (imported on its own: prometheus_client is the optional ``metrics`` extra).

May import: ``rqueue.store``, ``rqueue.encoding.payload``, ``rqueue.settings.config``,
``rqueue.errors`` and ``rqueue.text``. Never ``rqueue.worker`` or ``rqueue.cli``: the
worker calls the collector and the heartbeat, the CLI and the dashboard call the readers.
"""

from rqueue.metrics.read import MINUTES_KEPT, MinutePoint, oldest_wait, queue_series, totals
from rqueue.metrics.registry import RunningTask, WorkerInfo, list_workers
from rqueue.metrics.schema import BOUNDS, Histogram, TaskCounts

__all__ = [
    "BOUNDS",
    "MINUTES_KEPT",
    "Histogram",
    "MinutePoint",
    "RunningTask",
    "TaskCounts",
    "WorkerInfo",
    "list_workers",
    "oldest_wait",
    "queue_series",
    "totals",
]
