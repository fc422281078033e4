"""Many schedules: what a worker parent's tick costs, and how late triggers fire (#16)::

    python benchmarks/scale/scale_schedules.py                         # 10^5 schedules
    python benchmarks/scale/scale_schedules.py --schedules 1000 --duration 5

``--schedules`` schedules fire every ``--every`` seconds, their start times spread
evenly over one period, so ``schedules / every`` triggers fall due each second. They
live on one queue, then (a fresh Redis each) spread over ``--queues`` queues.

The tick runs in this process, exactly as a worker parent's loop runs it
(``Supervisor._tick``: its migrate calls and registry check-in, then
``Scheduler.tick()``), and this loop then sleeps for the wait it returned, as the parent
blocks for it. No worker child takes the fired tasks, so they stay in the ready lists.
Per tick: this process's CPU, its round trips to Redis (one per command or pipeline)
and the Redis commands run (scripts' inner commands included, from INFO
commandstats). Lateness is when the fire call that enqueued a trigger returned, by
this machine's clock (the Redis server's too: it runs here), minus the trigger time,
for the triggers due after the measurement began (adding 10^5 schedules takes a
while: any overdue by then are left out). Before #30 it was the task's
``dispatched_at`` (when the tick read the timeline), which for a firing planned ahead
of its trigger is the trigger itself.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
from common import Requests, command_calls, command_delta, machine_summary, percentile, table
from scale_due import in_process_parent, parent_tick
from scale_schedule_burst import add_all, time_sends

from rqueue.schedules.api import Schedules
from rqueue.schedules.scheduler import Scheduler
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

HEADERS = (
    "schedules",
    "queues",
    "fires/s",
    "ticks",
    "CPU ms/tick",
    "CPU us/fire",
    "round trips/tick",
    "Redis cmds/tick",
    "fired",
    "late p50 ms",
    "late p99 ms",
    "late max ms",
    "add s",
)


def add_schedules(schedules: Schedules, count: int, queues: list[str], every: float) -> int:
    """Add ``count`` schedules round-robin over ``queues``, their first triggers spread
    over one period from when adding them should be done (2 ms each, and 2 s: one
    ``add`` each on a tree without ``add_many``); the first trigger's time (ms)."""
    first = schedules.now_ms() + 2000 + 2 * count
    period_ms = round(every * 1000)
    add_all(
        schedules,
        [
            {
                "name": f"scale-{i}",
                "task": bench_tasks.empty,
                "every": every,
                "queue": queues[i % len(queues)],
                "start": datetime.fromtimestamp((first + i * period_ms // count) / 1000, UTC),
            }
            for i in range(count)
        ],
    )
    return first


def run_one(count: int, queue_count: int, every: float, duration: float) -> tuple[object, ...]:
    """One measurement on a fresh Redis: a row of ``HEADERS``."""
    queues = [f"sched-{i}" for i in range(queue_count)]
    with RedisServer() as server:
        queue = RedisQueue(Config.resolve(redis_url=server.url))
        began = time.perf_counter()
        first = add_schedules(Schedules(queue), count, queues, every)
        added = time.perf_counter() - began
        parent = in_process_parent(server.url, queues)
        scheduler = Scheduler(parent.queue, queues)
        clock = queue.scripts.clock
        while (start_ms := clock(queue.client, (queue.keys(queues[0]).schedules,), ())) < first:
            time.sleep(0.01)
        late: list[float] = []  # each trigger's, as its fire call returned
        time_sends(
            scheduler,
            lambda fired: late.extend(
                time.time() * 1000 - f.read_ms for f in fired if f.read_ms >= start_ms
            ),
        )
        ticks = 0
        cpu = 0.0
        calls_before = command_calls(queue.client)
        with Requests() as requests:
            until = time.monotonic() + duration
            while time.monotonic() < until:
                started = time.process_time()
                wait = min(parent_tick(parent), scheduler.tick())
                cpu += time.process_time() - started
                ticks += 1
                time.sleep(min(wait, 1.0))
            sent = requests.sent
        calls = command_delta(calls_before, command_calls(queue.client))
        redis_commands = sum(calls.values()) - calls.get("info", 0)
    return (
        count,
        queue_count,
        count / every,
        ticks,
        cpu / ticks * 1000,
        cpu / max(1, len(late)) * 1e6,
        sent / ticks,
        redis_commands / ticks,
        len(late),
        percentile(late, 0.5),
        percentile(late, 0.99),
        max(late, default=float("nan")),
        added,
    )


def run(
    schedules: int = 100_000,
    queue_counts: tuple[int, ...] = (1, 100),
    every: float = 60.0,
    duration: float = 20.0,
) -> list[tuple[object, ...]]:
    """One row of ``HEADERS`` per queue count."""
    return [run_one(schedules, n, every, duration) for n in queue_counts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--queues", type=int, default=100, help="the spread run's queue count")
    parser.add_argument("--every", type=float, default=60.0, help="each schedule's period (s)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of ticks measured")
    args = parser.parse_args(argv)
    logging.getLogger("rqueue").setLevel(logging.WARNING)
    print(machine_summary())
    rows = run(args.schedules, (1, args.queues), args.every, args.duration)
    table(HEADERS, rows, f"Scheduler ticks, schedules every {args.every:g} s, {args.duration:g} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
