"""What middleware and unique tasks cost per task, next to a plain task, in one run.

The worker child runs in this process as in ``hot_path.py``; each round queues the
tasks of one kind and runs them all. Printed per kind: the child's CPU and round trips per
task, and the dispatching side's (``dispatch_many``, 1,000 calls at a time); round
trips are counted on the client (see ``common.Requests``).

    python benchmarks/speed/middleware.py              # 20,000 tasks per kind, 3 rounds
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
from common import Requests, machine_summary, median, table
from in_process import drain, fill, in_process_child

from rqueue.server import RedisServer


def kinds() -> dict[str, Callable[[int], object]]:
    """How to queue ``count`` tasks of each kind (dispatch_many: one round trip each)."""
    numbers = iter(range(10**12))
    return {
        "plain": lambda count: bench_tasks.empty.dispatch_many([()] * count),
        "middleware=[]": lambda count: bench_tasks.empty.using(middleware=[]).dispatch_many(
            [()] * count
        ),
        "one pass-through": lambda count: bench_tasks.empty_passthrough.dispatch_many([()] * count),
        "RateLimited": lambda count: bench_tasks.empty_rate_limited.dispatch_many([()] * count),
        "unique": lambda count: bench_tasks.empty_unique.dispatch_many(
            [(next(numbers),) for _ in range(count)]
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per kind and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("rqueue").setLevel(logging.WARNING)
    results: dict[str, list[tuple[float, float, int, int]]] = {name: [] for name in kinds()}
    with Requests() as requests, RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        worker = in_process_child(server.url)
        print(machine_summary(worker.store.client))
        for _ in range(args.rounds):  # kinds interleaved, so drift hits all alike
            for name, dispatch in kinds().items():
                sent, cpu = requests.sent, time.process_time()
                fill(dispatch, args.tasks)
                dispatch_trips, dispatch_cpu = requests.sent - sent, time.process_time() - cpu
                sent = requests.sent
                child_cpu, _ = drain(worker, args.tasks)
                results[name].append(
                    (child_cpu, dispatch_cpu, dispatch_trips, requests.sent - sent)
                )
    plain = median([run[0] for run in results["plain"]])
    rows = []
    for name, runs in results.items():
        child = median([run[0] for run in runs])
        rows.append(
            (
                name,
                child / args.tasks * 1e6,
                f"{child / plain:.2f}x",
                median([run[3] for run in runs]) / args.tasks,
                median([run[1] for run in runs]) / args.tasks * 1e6,
                median([run[2] for run in runs]) / args.tasks,
            )
        )
    table(
        (
            "kind",
            "child CPU us/task",
            "vs plain",
            "child round trips/task",
            "dispatch CPU us/task",
            "dispatch round trips/task",
        ),
        rows,
        f"Middleware and unique tasks, {args.tasks:,} empty tasks per kind, median of "
        f"{args.rounds} rounds",
    )


if __name__ == "__main__":
    main()
