"""rqueue in the shapes its anchors publish their own figures in, with the hardware named.

``sidekiqload``: Sidekiq's ``bin/sidekiqload`` creates 500,000 no-op jobs and runs them
through one process as fast as it can (Sidekiq 7 reports about 23,500 jobs/s on one
core). Here 500,000 ``bench_tasks.empty`` tasks are dispatched beforehand in bulks of
10,000, then one ``rqueue work -c 1`` runs them: process mode, ``--threads N`` and
``--slots N`` (the ``async def`` no-op). The rate is from the first task taken to the
queue drained; CPU is the worker's (parent and child) and Redis' own over that span,
and tasks per worker CPU-second is the per-core figure.

``bullmq``: the shape of BullMQ's bench: "add jobs", 10,000 dispatches with 100 in
flight at a time (``dispatch_async`` from one event loop, as ``queue.add`` in
``Promise.all`` batches of 100), then "process jobs", those 10,000 run by one worker
with a concurrency of 100 (``--slots 100``, the ``async def`` no-op), and in process mode.

    python benchmarks/speed/anchors.py sidekiqload                 # 500,000 tasks
    python benchmarks/speed/anchors.py sidekiqload --tasks 50000 --modes process
    python benchmarks/speed/anchors.py bullmq
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import psutil
import redis
from common import machine_summary, rqueue_work, table, wait_until

from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import Task

BULK = 10_000
MODES = {
    "process": ((), bench_tasks.empty),
    "threads": (("--threads",), bench_tasks.empty),
    "slots": (("--slots",), bench_tasks.empty_async),
}
"""Each mode's ``rqueue work`` option (given ``--per-process``) and its no-op task."""


def redis_cpu(client: redis.Redis) -> float:
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its children, while they run."""
    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _drained(queue: RedisQueue) -> bool:
    size = queue.sizes(["default"])[0]
    return size.ready == size.reserved == 0


def drain(
    queue: RedisQueue, url: str, tasks: int, extra: tuple[str, ...]
) -> tuple[float, float, float]:
    """Start one worker on the filled queue: its rate, its CPU and Redis' over the run."""
    client = queue.client
    worker = rqueue_work(url, 1, *extra)
    try:
        ready = queue.keys("default").ready
        started = wait_until(lambda: client.llen(ready) < tasks, 60, 0.001)
        cpu_before, redis_before = tree_cpu(worker.pid), redis_cpu(client)
        finished = wait_until(lambda: _drained(queue), 1800, 0.005)
        cpu, redis_used = tree_cpu(worker.pid) - cpu_before, redis_cpu(client) - redis_before
    finally:
        stop_process(worker)
    return tasks / (finished - started), cpu, redis_used


@contextlib.contextmanager
def served() -> Iterator[tuple[RedisQueue, str]]:
    """A redis-server of this run's own, the default queue on it, the machine named."""
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        print(machine_summary(queue.client))
        yield queue, server.url


def mode_of(name: str, at_once: int) -> tuple[tuple[str, ...], Task[..., Any]]:
    """A mode's ``rqueue work`` options and its no-op task."""
    option, job = MODES[name]
    return ((*option, str(at_once)) if option else ()), job


def sidekiqload(args: argparse.Namespace) -> None:
    rows = []
    with served() as (queue, url):
        for mode in args.modes.split(","):
            extra, job = mode_of(mode, args.per_process)
            queue.client.flushall()
            pushed = time.perf_counter()
            for start in range(0, args.tasks, BULK):
                job.dispatch_many([()] * min(BULK, args.tasks - start))
            push_rate = args.tasks / (time.perf_counter() - pushed)
            rate, cpu, redis_used = drain(queue, url, args.tasks, extra)
            rows.append(
                (
                    f"rqueue work -c 1 {' '.join(extra)}".strip(),
                    push_rate,
                    rate,
                    cpu,
                    args.tasks / cpu,
                    redis_used,
                )
            )
    table(
        ("worker", "dispatch/s", "tasks/s", "worker CPU s", "tasks per CPU-s", "Redis CPU s"),
        rows,
        f"sidekiqload shape: {args.tasks:,} no-op tasks dispatched in bulks of {BULK:,}, "
        "then one worker process (tasks/s: first taken to drained)",
    )


async def add_jobs(job: Task[..., object], jobs: int, in_flight: int) -> float:
    """BullMQ bench's "add jobs": ``in_flight`` dispatches at a time, ``jobs`` in all."""
    started = time.perf_counter()
    for start in range(0, jobs, in_flight):
        await asyncio.gather(*(job.dispatch_async() for _ in range(min(in_flight, jobs - start))))
    return jobs / (time.perf_counter() - started)


def bullmq(args: argparse.Namespace) -> None:
    rows = []
    with served() as (queue, url):
        for mode in ("slots", "process"):
            extra, job = mode_of(mode, args.in_flight)
            queue.client.flushall()
            added = asyncio.run(add_jobs(job, args.jobs, args.in_flight))
            rate, cpu, _ = drain(queue, url, args.jobs, extra)
            rows.append((f"rqueue work -c 1 {' '.join(extra)}".strip(), added, rate, cpu))
    table(
        ("worker", "add jobs /s", "process jobs /s", "worker CPU s"),
        rows,
        f"BullMQ bench shape: {args.jobs:,} jobs added {args.in_flight} in flight at a time, "
        "then processed by one worker",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    load = parts.add_parser("sidekiqload")
    load.add_argument("--tasks", type=int, default=500_000)
    load.add_argument("--modes", default="process,threads,slots")
    load.add_argument("--per-process", type=int, default=10, help="threads or slots (Sidekiq: 10)")
    bull = parts.add_parser("bullmq")
    bull.add_argument("--jobs", type=int, default=10_000)
    bull.add_argument("--in-flight", type=int, default=100)
    args = parser.parse_args()
    sidekiqload(args) if args.part == "sidekiqload" else bullmq(args)


if __name__ == "__main__":
    main()
