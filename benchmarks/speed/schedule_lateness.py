"""Trigger lateness of schedules fired by several worker parents (issue 5)::

    python benchmarks/speed/schedule_lateness.py --workers 3 --schedules 50 --duration 30

Starts a redis-server (unless REDIS_URL is set: then it FLUSHES that database),
``--workers`` ``rqueue work`` parents, and ``--schedules`` schedules firing every
second for ``--duration`` seconds. Each run records its start lateness, by Redis's
clock: when the task started in a child minus the trigger time (what a user waits for;
it includes the enqueue). The script prints its p50/p99/max and the count of duplicated
or missing triggers (both must be 0).

Before #30 it also printed an enqueue lateness, the task's ``dispatched_at`` minus the
trigger; a firing planned ahead of its trigger is dispatched at the trigger itself, so
that figure is 0 by construction. ``benchmarks/scale/scale_schedules.py`` times the
enqueue from the fire call's return instead.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rqueue import Job, task
from rqueue.store.default import default_queue, use

HERE = Path(__file__).resolve().parent
RUNS = "bench:schedule-runs"
COUNTS = "bench:schedule-counts"


def _record(result: Any, job: Job) -> None:
    client = default_queue().client
    sec, micro = client.time()
    started = int(sec) * 1000 + int(micro) // 1000
    trigger = int(job.meta["trigger_ms"])
    pipe = client.pipeline(transaction=False)
    pipe.rpush(RUNS, started - trigger)
    pipe.hincrby(COUNTS, f"{job.meta['schedule']}@{trigger}", 1)
    pipe.execute()


@task(after_succeeded=_record)
def tick() -> None:
    """Fired by the benchmark's schedules; the hook records its lateness."""


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--schedules", type=int, default=50)
    parser.add_argument("--duration", type=int, default=30)
    options = parser.parse_args()

    from rqueue import RedisQueue, schedules
    from rqueue.server import RedisServer
    from rqueue.settings.config import Config

    server = None if os.environ.get("REDIS_URL") else RedisServer().__enter__()
    url = os.environ.get("REDIS_URL") or (server.url if server else "")
    queue = RedisQueue(Config.resolve(redis_url=url))
    queue.client.flushdb()
    use(queue)
    env = {**os.environ, "REDIS_URL": url}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rqueue",
                "work",
                "--concurrency",
                str(options.concurrency),
                "--log-level",
                "WARNING",
            ],
            cwd=HERE,
            env=env,
            start_new_session=True,
        )
        for _ in range(options.workers)
    ]
    try:
        time.sleep(3)  # let the workers start before the first trigger
        sec, _ = queue.client.time()
        start = (int(sec) + 2) * 1000
        end = start + (options.duration - 1) * 1000
        for i in range(options.schedules):
            schedules.add(
                f"lateness-{i}",
                tick,
                every=1,
                start=datetime.fromtimestamp(start / 1000, timezone.utc),
                end=datetime.fromtimestamp(end / 1000, timezone.utc),
            )
        expected = options.schedules * options.duration
        deadline = time.monotonic() + options.duration + 60
        while queue.client.llen(RUNS) < expected and time.monotonic() < deadline:
            time.sleep(0.5)
        started = [float(r) for r in queue.client.lrange(RUNS, 0, -1)]
        counts = [int(v) for v in queue.client.hgetall(COUNTS).values()]
    finally:
        for worker in workers:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            worker.wait(30)
        if server is not None:
            server.stop()
    print(
        f"{options.workers} worker parents x {options.concurrency} children, "
        f"{options.schedules} schedules every 1 s for {options.duration} s"
    )
    print(
        f"runs {len(started)} of {expected} expected; distinct triggers {len(counts)}; "
        f"duplicated {sum(1 for c in counts if c > 1)}; missing {expected - len(counts)}"
    )
    if started:
        print(
            f"start lateness ms: p50 {percentile(started, 0.5):.0f}  "
            f"p99 {percentile(started, 0.99):.0f}  max {max(started):.0f}  "
            f"mean {statistics.mean(started):.1f}"
        )
    return 0 if len(counts) == expected and all(c == 1 for c in counts) else 1


if __name__ == "__main__":
    sys.exit(main())
