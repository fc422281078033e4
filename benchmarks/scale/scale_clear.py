"""``rqueue clear`` of a large queue (#30): the longest single Redis call it makes, and
how long Redis then takes to give the memory back.

A fresh Redis is filled with ``--tasks`` real pending tasks, pushed by ``push_many`` as
a dispatch pushes them (pending-ids included): four in five ready, one in five delayed
a minute, the first of each push of 1,000 with a unique lock, and ``RESERVED`` of them
reserved. Then the real CLI clears the queue (``rqueue clear default --force``, measured
as scale_failed.py measures each command: ``SLOWLOG``'s longest call, the commands Redis
ran, the wall time with the CLI's start-up), ``--runs`` times, filled anew each time.

clear.lua unlinks the keys, so Redis frees them on its background thread after the
call: "freed after" is how long, from the command's end, until ``INFO memory`` shows no
object pending a lazy free (0 where the call freed them itself). To measure another
checkout (the baseline), put it first on ``PYTHONPATH``: the fill and the CLI then run
its code.

    python benchmarks/scale/scale_clear.py --tasks 500000
    PYTHONPATH=/tmp/base python benchmarks/scale/scale_clear.py --tasks 500000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import redis
from common import machine_summary, median, table
from scale_failed import LOGGED_OVER_US, QUEUE, RQUEUE_TREE, SLOWLOG_LEN, measure

from rqueue.encoding.payload import Job, encode, new_id
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.queue import Push, RedisQueue, UniqueLock

PER_PUSH = 1000
RESERVED = 100
FREED_WITHIN_S = 60.0
"""The longest wait for the background thread; past it the row says so."""


def fill(queue: RedisQueue, tasks: int) -> None:
    """``tasks`` pending tasks, ``PER_PUSH`` a push: every fifth push delayed, the first
    task of each unique; then ``RESERVED`` of the ready ones reserved."""
    for start in range(0, tasks, PER_PUSH):
        jobs = [
            Job(new_id(), "tasks:charge", (i, "card"), {}, QUEUE)
            for i in range(start, min(tasks, start + PER_PUSH))
        ]
        lock = UniqueLock(0, f"tasks:charge:{start}", jobs[0].id, 3_600_000)
        delay_ms = 60_000 if (start // PER_PUSH) % 5 == 0 else 0
        queue.push_many([Push(QUEUE, delay_ms, [encode(job) for job in jobs], locks=[lock])])
    queue.reserve(QUEUE, RESERVED, 3_600_000, 0, 0)
    queue.remember_queues([QUEUE])


def freed_after(client: redis.Redis) -> float:
    """Seconds until no object waits for Redis's lazy free (``FREED_WITHIN_S`` at most)."""
    started = time.perf_counter()
    while int(client.info("memory").get("lazyfree_pending_objects", 0)):
        if time.perf_counter() - started > FREED_WITHIN_S:
            break
        time.sleep(0.001)
    return time.perf_counter() - started


def run(tasks: int, runs: int) -> tuple[list[tuple[object, ...]], list[float]]:
    """A row per run, and each run's longest call (ms)."""
    rows: list[tuple[object, ...]] = []
    longest: list[float] = []
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        client = queue.client
        client.config_set("slowlog-max-len", SLOWLOG_LEN)
        print(machine_summary(client), flush=True)
        print(f"rqueue from {RQUEUE_TREE}", flush=True)
        empty = _used_mb(client)
        for number in range(1, runs + 1):
            started = time.perf_counter()
            client.config_set("slowlog-log-slower-than", -1)  # the fill is not measured
            fill(queue, tasks)
            filled = _used_mb(client)
            print(f"filled {tasks:,} tasks in {time.perf_counter() - started:.1f} s", flush=True)
            client.config_set("slowlog-log-slower-than", LOGGED_OVER_US)
            cleared = measure(client, server.url, "clear", ["clear", QUEUE, "--force"])
            freed = freed_after(client)
            left = _used_mb(client) - empty
            rows.append((number, *cleared[1:], round(freed, 3), round(filled - empty), left))
            longest.append(cleared.longest_ms)
            print(f"  {rows[-1]}", flush=True)
    return rows, longest


def _used_mb(client: redis.Redis) -> float:
    return round(int(client.info("memory")["used_memory"]) / 2**20, 1)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args(argv)
    rows, longest = run(options.tasks, options.runs)
    headers = (
        "run",
        "wall s",
        "Redis commands",
        "calls > 1 ms",
        "longest ms",
        "longest call",
        "freed after s",
        "MB filled",
        "MB left",
    )
    table(headers, rows, f"rqueue clear of {options.tasks:,} pending tasks")
    print(f"median longest call: {median(longest):.2f} ms over {len(rows)} runs")


if __name__ == "__main__":
    main()
