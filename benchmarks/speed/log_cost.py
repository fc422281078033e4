"""What the worker's per-task log line costs: ``rqueue work`` at INFO beside WARNING.

At the default ``--log-level INFO`` a child writes one line per task to its stderr
(here a file, as a service's log would be). For each checkout in ``--tree`` (alternate
two, in one sitting), each round measures the bare-INCR ceiling, then ``--tasks``
INCR tasks with ``rqueue work default -c N`` at WARNING and at INFO, from the first
task taken to the last: the rates beside the ceiling, and the lines the INFO run wrote
(one per task, or the figure is wrong). Medians over ``--rounds``:

    python benchmarks/speed/log_cost.py --tree /tmp/before --tree .
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
from ceilings import bare_incr_rate
from common import machine_summary
from throughput import measure_processing

from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

LEVELS = ("WARNING", "INFO")


def one_round(queue: RedisQueue, url: str, tree: Path, tasks: int, concurrency: int) -> list[float]:
    """The tree's rates at each of ``LEVELS`` as fractions of the ceiling just measured."""
    ceiling = bare_incr_rate(url, tasks, concurrency)
    env = {"PYTHONPATH": str(tree)}
    fractions = []
    for level in LEVELS:
        with tempfile.TemporaryFile() as log:
            run = measure_processing(
                queue, url, bench_tasks.incr, "incr", tasks, concurrency,
                ("--log-level", level), env=env, stderr=log,
            )  # fmt: skip
            log.seek(0)
            lines = log.read().count(b": succeeded (")
        if lines != (tasks if level == "INFO" else 0):
            print(f"  ! {tree} at {level}: {lines:,} task lines for {tasks:,} tasks")
        fractions.append(run.steady / ceiling)
    return fractions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--tree", type=Path, action="append", help="a checkout (repeatable)")
    options = parser.parse_args()
    trees = [tree.resolve() for tree in options.tree or [Path(__file__).resolve().parents[2]]]
    figures: dict[Path, list[list[float]]] = {tree: [] for tree in trees}
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        print(machine_summary(queue.client))
        for number in range(options.rounds):
            for tree in trees if number % 2 == 0 else trees[::-1]:
                fractions = one_round(queue, server.url, tree, options.tasks, options.concurrency)
                figures[tree].append(fractions)
                shown = ", ".join(f"{lv} {f:.2f}" for lv, f in zip(LEVELS, fractions, strict=True))
                print(f"  round {number + 1} {tree}: x ceiling {shown}", flush=True)
    for tree, rounds in figures.items():
        medians = [statistics.median(column) for column in zip(*rounds, strict=True)]
        shown = ", ".join(f"{lv} {m:.2f}" for lv, m in zip(LEVELS, medians, strict=True))
        print(f"{tree}: median x bare-INCR ceiling over {options.rounds} rounds: {shown}")


if __name__ == "__main__":
    main()
