"""Prometheus exposition: a collector that reads rqueue's state from Redis on each scrape.

Nothing is counted in the scraping process: the workers' counts are in Redis already
(``collector.py``), so any number of exporters (``rqueue metrics``, the dashboard's
``/metrics``) show the same figures, and a restarted exporter loses nothing. A scrape
costs a few pipelined round trips: the queue sizes, the ready lists' heads, the
all-time hashes (250 queues per pipeline each), and the worker registry.

prometheus_client is optional (the ``metrics`` and ``web`` extras); it is imported
here only, and its absence is one clear ImportError naming the extra.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rqueue.metrics.read import SIZES_PER_CALL, queue_rows, totals_of
from rqueue.metrics.registry import list_workers
from rqueue.store.queue import RedisQueue

try:
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector, CollectorRegistry
except ImportError as missing:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "rqueue's Prometheus metrics need prometheus_client: pip install 'rqueue[metrics]'"
    ) from missing

_SIZES = ("ready", "delayed", "reserved", "failed")
_SIZE_HELP = {
    "ready": "Tasks waiting to be taken.",
    "delayed": "Tasks waiting for their due time (later(), retries in backoff).",
    "reserved": "Tasks a worker holds now.",
    "failed": "Tasks in the failed list.",
}


class RQueueCollector(Collector):
    """Every rqueue metric of ``queues`` (None: every queue in the registry)."""

    def __init__(self, queue: RedisQueue, queues: Sequence[str] | None = None) -> None:
        self.queue = queue
        self.queues = list(queues) if queues is not None else None

    def collect(self) -> Iterator[Metric]:
        names = self.queues if self.queues is not None else self.queue.known_queues()
        sizes = {size: _gauge(f"rqueue_queue_{size}", _SIZE_HELP[size]) for size in _SIZES}
        oldest = _gauge(
            "rqueue_queue_oldest_wait_seconds",
            "Seconds the next ready task has waited since its dispatch.",
        )
        counters = {
            "processed": _counter("rqueue_tasks_processed", "Tasks that succeeded."),
            "failed": _counter("rqueue_tasks_failed", "Tasks that failed for good."),
            "retried": _counter("rqueue_tasks_retried", "Attempts that failed and were retried."),
        }
        runtime = _histogram("rqueue_task_runtime_seconds", "Seconds each attempt ran.")
        wait = _histogram(
            "rqueue_task_wait_seconds", "Seconds from dispatch to the start of a first attempt."
        )
        for start in range(0, len(names), SIZES_PER_CALL):
            chunk = names[start : start + SIZES_PER_CALL]
            for row in queue_rows(self.queue, chunk):
                for kind, family in sizes.items():
                    family.add_metric([row.size.name], getattr(row.size, kind))
                if row.oldest_wait is not None:
                    oldest.add_metric([row.size.name], row.oldest_wait)
            for name, by_task in totals_of(self.queue, chunk).items():
                for task, counts in sorted(by_task.items()):
                    labels = [name, task]
                    for kind, counter in counters.items():
                        counter.add_metric(labels, getattr(counts, kind))
                    for observed, histogram in ((runtime, counts.runtime), (wait, counts.wait)):
                        buckets = [(_le(le), n) for le, n in histogram.cumulative()]
                        observed.add_metric(labels, buckets, histogram.sum)
        workers = _gauge("rqueue_workers", "Worker processes (parents) registered now.", [])
        workers.add_metric([], len(list_workers(self.queue)))
        yield from (*sizes.values(), oldest, *counters.values(), runtime, wait, workers)


def registry_for(queue: RedisQueue, queues: Sequence[str] | None = None) -> CollectorRegistry:
    """A registry holding only rqueue's collector, to serve with prometheus_client
    (``make_asgi_app(registry)``, ``start_http_server(port, registry=registry)``)."""
    registry = CollectorRegistry()
    registry.register(RQueueCollector(queue, queues))
    return registry


def _gauge(name: str, documentation: str, labels: Sequence[str] = ("queue",)) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels))


def _counter(name: str, documentation: str) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, labels=["queue", "task"])


def _histogram(name: str, documentation: str) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, documentation, labels=["queue", "task"])


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
