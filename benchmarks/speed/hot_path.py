"""The worker child's loop alone, in this process: CPU and wall time per empty task.

No parent, no fork, no other child: one ``ChildWorker`` takes batches from a queue
filled beforehand and runs them, and this script reads the CPU time it used. It is
the figure to watch when changing the hot path (worker/child.py, worker/outcomes.py,
worker/reservations.py, store/queue.py, payload.py, reserve.lua), because it leaves
out what ``throughput.py`` adds on top (process start-up, the parent, the scheduler
sharing two cores).

    python benchmarks/speed/hot_path.py               # 30,000 tasks, 3 rounds
    python benchmarks/speed/hot_path.py --prefetch 1  # one task per reserve call
    python benchmarks/speed/hot_path.py --task incr   # one INCR per task, beside bare INCRs

``--task incr`` runs ``bench_tasks.incr`` (one redis-py INCR) instead of the empty task,
and times the same INCR in a bare loop in this process after the rounds: a task's cost
beside the sum of its parts, the loop (the empty task's figure) and its INCR.

Each round runs one child with metrics off and one with metrics on (``--no-metrics``
and the default), in alternating order, so both see the same machine: the cost of the
per-task counters (rqueue/metrics/collector.py) is the difference between the rows.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
from common import command_calls, command_delta, machine_summary, median, table
from in_process import drain, fill, in_process_child

from rqueue.encoding.payload import Job, new_id
from rqueue.metrics.collector import Collector, NoMetrics
from rqueue.server import RedisServer
from rqueue.store.queue import RedisQueue


def record_cost(queue: RedisQueue, calls: int = 200_000, rounds: int = 5) -> tuple[float, float]:
    """Microseconds per task of recording its success and flushing it to Redis (one
    flush per round), with the collector and with ``NoMetrics`` (the best of
    ``rounds``, interleaved): the metrics' own share of the figures above."""
    job = Job(new_id(), "bench_tasks:empty", (), {}, "default", 1, dispatched_at=time.time())
    best = {True: math.inf, False: math.inf}
    for _ in range(rounds):
        for on, metrics in ((True, Collector(queue)), (False, NoMetrics())):
            record = metrics.succeeded
            start = time.perf_counter()
            for _ in range(calls):
                record("default", job, 0.00001)
            metrics.flush()
            best[on] = min(best[on], (time.perf_counter() - start) / calls * 1e6)
    return best[True], best[False]


def bare_incr_cpu(calls: int) -> float:
    """CPU microseconds per INCR of ``bench_tasks.incr``'s own client in a tight loop."""
    client = bench_tasks.client()
    figures = []
    for _ in range(3):
        start = time.process_time()
        for _ in range(calls):
            client.incr(bench_tasks.COUNTER)
        figures.append((time.process_time() - start) / calls * 1e6)
    return median(figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30_000, help="tasks per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--task", choices=("empty", "incr"), default="empty")
    args = parser.parse_args()
    logging.getLogger("rqueue").setLevel(logging.WARNING)
    with RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        children = {on: in_process_child(server.url, args.prefetch, on) for on in (False, True)}
        measured = bench_tasks.incr if args.task == "incr" else bench_tasks.empty
        client = children[True].store.client
        print(machine_summary(client))
        rows = []
        rates: dict[bool, list[float]] = {False: [], True: []}
        cpus: dict[bool, list[float]] = {False: [], True: []}
        calls_made = {False: 0, True: 0}
        for round_number in range(1, args.rounds + 1):
            order = (False, True) if round_number % 2 else (True, False)
            for metrics in order:
                fill(lambda count: measured.dispatch_many([()] * count), args.tasks)
                calls = command_calls(client)
                cpu, wall = drain(children[metrics], args.tasks)
                # Every call the child makes on the hot path is a script (EVALSHA):
                # reserve (with acks) per batch, and with metrics a flush per second.
                used = command_delta(calls, command_calls(client)).get("evalsha", 0)
                rates[metrics].append(args.tasks / wall)
                cpus[metrics].append(cpu / args.tasks * 1e6)
                calls_made[metrics] += used
                rows.append(
                    (
                        round_number,
                        "on" if metrics else "off",
                        args.tasks,
                        cpu / args.tasks * 1e6,
                        args.tasks / wall,
                        used / args.tasks,
                    )
                )
        cost = record_cost(children[True].store)
        bare = bare_incr_cpu(args.tasks) if args.task == "incr" else None
    table(
        ("round", "metrics", "tasks", "child CPU us/task", "tasks/s", "script calls/task"),
        rows,
        f"One worker child in-process, {args.task} tasks, --prefetch {args.prefetch}",
    )
    # The best round of each is the least disturbed by whatever else the machine runs.
    for label, figures, unit, best in (
        ("tasks/s", rates, ",.0f", max),
        ("child CPU us/task", cpus, ".2f", min),
    ):
        for kind, pick in (("median", median), ("best", best)):
            off, on = pick(figures[False]), pick(figures[True])
            change = (on / off - 1) * 100
            print(f"{kind} {label}: metrics off {off:{unit}}, on {on:{unit}} ({change:+.1f}%)")
    tasks = args.tasks * args.rounds
    print(
        f"script calls: metrics off {calls_made[False]:,} for {tasks:,} tasks, "
        f"on {calls_made[True]:,} (the difference: flushes)"
    )
    print(
        f"one success recorded and flushed: {cost[0]:.3f} us, with --no-metrics "
        f"{cost[1]:.3f} us (best of 5 x 200,000)"
    )
    if bare is not None:
        print(f"the same INCR in a bare loop here: {bare:.2f} us of CPU each (median of 3)")


if __name__ == "__main__":
    main()
