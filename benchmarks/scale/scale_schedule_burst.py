"""Schedules in bulk: 5,000 due at one instant, and adding 10^5 (#30)::

    python benchmarks/scale/scale_schedule_burst.py                  # 5,000 due, 10^5 added
    python benchmarks/scale/scale_schedule_burst.py --due 1000 --add 10000 --runs 1

**Due at one instant**: ``--due`` schedules of one queue, every 60 s, all with the same
first trigger a few seconds ahead. The worker parent's tick runs in this process as
``scale_schedules.py`` runs it (``Supervisor._tick``'s migrate and registry check-in,
then ``Scheduler.tick()``, then a sleep for the wait it returned) until every trigger
is enqueued. Lateness, by the machine's clock (the Redis server's too: it runs here),
minus the trigger time:

- read: the task's ``dispatched_at``, what ``scale_schedules.py`` reports: when the
  tick read the schedule off the timeline, or, for a firing planned ahead of its
  trigger (#30), the trigger itself (0 ms);
- enqueued: when the script call that pushed the task returned, the later and the
  one that counts (a tick may read many schedules before it fires them).

Also this process's CPU for the burst (the scheduler's, as in a parent).

**Adding**: ``--add`` schedules over 100 queues through the fastest way the tree under
test has: ``schedules.add_many`` (#30), else one ``schedules.add`` each.

Run it once per tree, alternating, in one sitting: ``PYTHONPATH=<tree>`` picks the
code measured (the first row says which ``rqueue`` was imported).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
from common import machine_summary, percentile, table
from scale_due import in_process_parent, parent_tick

import rqueue
from rqueue.encoding.payload import decode
from rqueue.schedules.api import Schedules
from rqueue.schedules.scheduler import Scheduler
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

BURST_HEADERS = (
    "due",
    "fired",
    "read p50 ms",
    "read p99 ms",
    "read max ms",
    "enqueued p50 ms",
    "enqueued p99 ms",
    "enqueued max ms",
    "CPU ms",
    "CPU us/fire",
)
ADD_HEADERS = ("schedules", "queues", "how", "s", "schedules/s")
LEAD_MS = 3000
"""How far ahead of the first tick the common trigger lies."""


def add_all(schedules: Schedules, entries: list[dict[str, Any]]) -> str:
    """Add ``entries`` the fastest way this tree has; say which way."""
    if hasattr(schedules, "add_many"):
        schedules.add_many(entries)
        return "add_many"
    for entry in entries:
        schedules.add(**entry)
    return "add, one call each"


def time_sends(scheduler: Scheduler, note: Any) -> None:
    """Call ``note(firings)`` as each fire call returns, with the firings it won that
    enqueued a task: wraps ``store.send`` (#30: firings planned ahead are sent at the
    trigger), else ``store.fire`` (the tree under test is older)."""
    store: Any = scheduler.store
    if hasattr(store, "send"):
        send = store.send

        def timed_send(batch: Sequence[Any]) -> list[Any]:
            sent = send(batch)
            note(
                [
                    firing
                    for prepared, result in zip(batch, sent, strict=True)
                    for firing, won in zip(prepared.firings, result.won, strict=True)
                    if won and firing.payloads
                ]
            )
            return sent

        store.send = timed_send
        return
    fire = store.fire

    def timed_fire(firings: Sequence[Any]) -> list[bool]:
        won = fire(firings)
        note([f for f, w in zip(firings, won, strict=True) if w and f.payloads])
        return won

    store.fire = timed_fire


def burst(count: int) -> tuple[object, ...]:
    """``count`` schedules due at one instant, fired by one parent: a row of
    ``BURST_HEADERS``."""
    with RedisServer() as server:
        queue = RedisQueue(Config.resolve(redis_url=server.url))
        schedules = Schedules(queue)
        trigger = schedules.now_ms() + LEAD_MS + count  # ~1 ms to add each, at worst
        start = datetime.fromtimestamp(trigger / 1000, UTC)
        entries = [
            {"name": f"due-{i}", "task": bench_tasks.empty, "every": 60, "start": start}
            for i in range(count)
        ]
        add_all(schedules, entries)
        parent = in_process_parent(server.url, ["default"])
        scheduler = Scheduler(parent.queue, ["default"])
        enqueued: list[float] = []
        time_sends(
            scheduler,
            lambda fired: enqueued.extend(time.time() * 1000 - trigger for _ in fired),
        )
        while schedules.now_ms() < trigger - 1000:
            time.sleep(0.01)
        cpu = 0.0
        deadline = time.monotonic() + 60
        while len(enqueued) < count and time.monotonic() < deadline:
            began = time.process_time()
            wait = min(parent_tick(parent), scheduler.tick())
            cpu += time.process_time() - began
            time.sleep(min(wait, 1.0))
        ready = queue.client.lrange(queue.keys("default").ready, 0, -1)
        read = [decode(p).dispatched_at * 1000 - trigger for p in ready]
    return (
        count,
        len(ready),
        *(percentile(read, f) for f in (0.5, 0.99)),
        max(read, default=float("nan")),
        *(percentile(enqueued, f) for f in (0.5, 0.99)),
        max(enqueued, default=float("nan")),
        cpu * 1000,
        cpu / max(1, len(ready)) * 1e6,
    )


def add(count: int, queue_count: int = 100) -> tuple[object, ...]:
    """Add ``count`` schedules over ``queue_count`` queues: a row of ``ADD_HEADERS``."""
    with RedisServer() as server:
        schedules = Schedules(RedisQueue(Config.resolve(redis_url=server.url)))
        start = datetime.fromtimestamp(schedules.now_ms() / 1000 + 3600, UTC)
        entries = [
            {
                "name": f"add-{i}",
                "task": bench_tasks.empty,
                "every": 60,
                "start": start,
                "queue": f"sched-{i % queue_count}",
            }
            for i in range(count)
        ]
        began = time.perf_counter()
        how = add_all(schedules, entries)
        took = time.perf_counter() - began
    return (count, queue_count, how, took, count / took)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--due", type=int, default=5000, help="schedules due at once (0: skip)")
    parser.add_argument("--add", type=int, default=100_000, help="schedules added (0: skip)")
    parser.add_argument("--runs", type=int, default=3, help="bursts, then their median")
    args = parser.parse_args(argv)
    logging.getLogger("rqueue").setLevel(logging.ERROR)
    print(machine_summary())
    print(f"rqueue from {Path(rqueue.__file__).parent}")
    if args.due and args.runs:
        rows = [burst(args.due) for _ in range(args.runs)]
        if len(rows) > 1:
            columns = list(zip(*rows, strict=True))[2:]
            rows.append(("median", "", *(statistics.median(c) for c in columns)))
        table(BURST_HEADERS, rows, f"{args.due:,} schedules due at one instant, one parent")
    if args.add:
        table(ADD_HEADERS, [add(args.add)], f"Adding {args.add:,} schedules")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
