"""The worker child's loop alone, in this process: CPU and wall time per empty task.

No parent, no fork, no other child: one ``ChildWorker`` takes batches from a queue
filled beforehand and runs them, and this script reads the CPU time it used. It is
the figure to watch when changing the hot path (worker/child.py, worker/outcomes.py,
worker/reservations.py, store/queue.py, payload.py, reserve.lua), because it leaves
out what ``throughput.py`` adds on top (process start-up, the parent, the scheduler
sharing two cores).

    python benchmarks/hot_path.py              # 30,000 tasks, 3 rounds
    python benchmarks/hot_path.py --prefetch 1 # one task per reserve call
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable

import bench_tasks
from common import machine_summary, table

from rqueue.config import Config
from rqueue.current import Runner, set_runner
from rqueue.server import RedisServer
from rqueue.store.default import use
from rqueue.worker.child import ChildWorker
from rqueue.worker.options import WorkerOptions
from rqueue.worker.scoreboard import Scoreboard
from rqueue.worker.timeouts import TimeLimit


def in_process_child(url: str, prefetch: int = 100) -> ChildWorker:
    """One worker child in this process (no parent, no fork), ready to ``_step()``."""
    options = WorkerOptions(prefetch=prefetch)
    board = Scoreboard(1, options.held_limit)
    worker = ChildWorker(
        options, Config.resolve(redis_url=url), board.slot(0), 1, os.getppid(), "hot"
    )
    use(worker.queue)
    worker.time_limit = TimeLimit()
    set_runner(Runner(worker.queue, options.timeout, options.kill_grace))
    return worker


def fill(dispatch: Callable[[int], object], tasks: int) -> None:
    """Queue ``tasks`` (``dispatch(count)`` queues ``count`` more), 1,000 at a time."""
    for start in range(0, tasks, 1000):
        dispatch(min(1000, tasks - start))


def drain(worker: ChildWorker, tasks: int) -> tuple[float, float]:
    """Run ``tasks`` more tasks: (child CPU seconds, wall seconds)."""
    target = worker.slot.processed + tasks
    cpu, wall = time.process_time(), time.perf_counter()
    while worker.slot.processed < target:
        worker._step()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30_000, help="tasks per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prefetch", type=int, default=100)
    args = parser.parse_args()
    logging.getLogger("rqueue").setLevel(logging.WARNING)
    with RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        worker = in_process_child(server.url, args.prefetch)
        print(machine_summary(worker.queue.client))
        rows = []
        for round_number in range(1, args.rounds + 1):
            fill(lambda count: bench_tasks.empty.dispatch_many([()] * count), args.tasks)
            cpu, wall = drain(worker, args.tasks)
            rows.append((round_number, args.tasks, cpu / args.tasks * 1e6, args.tasks / wall))
    table(
        ("round", "tasks", "child CPU us/task", "tasks/s"),
        rows,
        f"One worker child in-process, empty tasks, --prefetch {args.prefetch}",
    )


if __name__ == "__main__":
    main()
