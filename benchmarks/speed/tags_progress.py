"""What tags cost a dispatch, and what one progress report costs a task.

A producer's CPU per ``dispatch()`` of an empty task to a local Redis with no tags,
two fixed tags, and a ``tags=`` callable of the call's arguments, interleaved; then
the wall time of one ``current_job().progress()`` report (one ``progress.lua`` call:
a task pays it each time it reports, never otherwise).

    python benchmarks/speed/tags_progress.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks

from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store import progress
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatches", type=int, default=3_000, help="per round and kind")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    kinds = {
        "no tags": bench_tasks.empty,
        "two tags": bench_tasks.empty.using(tags=["billing", "nightly"]),
        "a tags callable": bench_tasks.empty.using(tags=lambda *args: ["order:42"]),
    }
    best = dict.fromkeys(kinds, float("inf"))
    with RedisServer() as server:
        queue = RedisQueue(Config.resolve(redis_url=server.url))
        use(queue)
        for _ in range(options.rounds):
            for name, target in kinds.items():
                start = time.process_time()
                for _ in range(options.dispatches):
                    target.dispatch()
                spent = (time.process_time() - start) / options.dispatches * 1e6
                best[name] = min(best[name], spent)
                queue.client.flushall()
        reports = options.dispatches
        start = time.perf_counter()
        for n in range(reports):
            progress.write(queue, "default", "ab" * 16, "bench_tasks:empty", 1, n / reports, "step")
        report_us = (time.perf_counter() - start) / reports * 1e6
    rounds = f"best of {options.rounds} x {options.dispatches:,}"
    print(f"dispatch() CPU, {rounds}: " + ", ".join(f"{k} {v:.1f} us" for k, v in best.items()))
    print(f"one progress report, wall (a round trip to a local Redis): {report_us:.1f} us")


if __name__ == "__main__":
    main()
