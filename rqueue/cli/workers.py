"""``rqueue workers``: the running workers, and the tasks each child runs right now.

Read from the worker registry (:mod:`rqueue.metrics.registry`): every ``rqueue work``
parent renews its entry each second, and a dead one's entry expires within
:data:`~rqueue.metrics.registry.ENTRY_TTL` seconds, so the list is of live workers.
"""

from __future__ import annotations

import dataclasses
import json
import time

import click

from rqueue.cli.common import connection_options, moment, say, table
from rqueue.metrics import WorkerInfo, list_workers
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.worker.pools.status import PoolStatus, list_pools


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@connection_options
def workers(config: Config, as_json: bool) -> None:
    """List running workers (host, pid, queues, concurrency, last heartbeat) and the
    tasks their children run now; then the pools `rqueue supervise` runs, their
    targets and their last scaling decision."""
    store = RedisQueue(config)
    found, pools = list_workers(store), list_pools(store)
    if as_json:
        # ASCII-only JSON: whatever came from Redis is escaped, never a raw control byte.
        say(json.dumps([dataclasses.asdict(w) for w in found], ensure_ascii=True))
        return
    now = time.time()
    table(
        ("worker", "host", "pid", "queues", "concurrency", "started", "heartbeat", "running"),
        [
            (
                w.id[:8],
                w.host,
                w.pid,
                ",".join(w.queues),
                _concurrency(w),
                moment(w.started),
                f"{max(0.0, now - w.heartbeat):.1f} s ago",
                len(w.tasks),
            )
            for w in found
        ],
    )
    running = [(w, t) for w in found for t in w.tasks]
    if running:
        say("")
        table(
            ("worker", "child", "task", "id", "queue", "running for"),
            [
                (
                    w.id[:8],
                    t.child,
                    t.task or "?",
                    t.id,
                    t.queue,
                    f"{max(0.0, now - t.started):.1f} s",
                )
                for w, t in running
            ],
        )
    if pools:
        _pools(pools, now)


def _pools(pools: list[PoolStatus], now: float) -> None:
    """Each supervised pool: its processes, each parent's target (and what it wanted),
    and what its last decision read."""
    say("")
    table(
        ("pool", "host", "balance", "processes", "targets (wanted)", "decided", "inputs"),
        [
            (
                p.name,
                p.host,
                p.balance,
                f"{p.processes} of {p.min_processes}-{p.max_processes}",
                "; ".join(f"{queues}: {target} ({wanted})" for queues, target, wanted in p.parents),
                f"{max(0.0, now - p.decided):.1f} s ago",
                p.why(),
            )
            for p in pools
        ],
    )


def _concurrency(worker: WorkerInfo) -> str:
    """``4 processes``, ``4 x 8 threads``; slots are per child, shown once tasks are async."""
    if worker.threads:
        return f"{worker.processes} x {worker.threads} threads"
    return f"{worker.processes} processes ({worker.slots} async slots each)"
