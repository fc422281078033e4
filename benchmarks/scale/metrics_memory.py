"""Redis memory of a queue's metrics: a full day of per-minute hashes, and the all-time one.

Writes what a worker child's collector would flush for one queue over 24 hours
(1,440 minutes), each minute holding ``--tasks`` task names that each ran tasks
with spread-out runtimes and waits (so several histogram buckets are filled, as in
real use), some retried and failed, through the real ``metrics_flush.lua``. Then
reports ``used_memory`` after minus before (less the script cache) and the sum of
``MEMORY USAGE`` of every metrics key: the bytes per queue per day that
docs/monitoring.md quotes.

    python benchmarks/scale/metrics_memory.py              # 1 and 5 task names
    python benchmarks/scale/metrics_memory.py --tasks 20
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

from common import machine_summary, table

from rqueue.metrics.collector import Collector, _Series
from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue

MINUTES = 24 * 60


def used_memory(queue: RedisQueue) -> int:
    info = queue.client.info("memory")
    return int(info["used_memory"]) - int(info.get("used_memory_scripts", 0))


def a_minute(tasks: int, rng: random.Random) -> list[tuple[str, _Series]]:
    """One minute's series of ``tasks`` task names: 100 attempts each, runtimes spread over
    5 ms to 2 s and waits over 1 ms to 10 s, a few retried and failed."""
    minute = []
    for number in range(tasks):
        series = _Series()
        failed, retried = rng.randrange(3), rng.randrange(5)
        series.others[:] = [failed, retried, failed + retried]
        series.runtimes.extend(rng.lognormvariate(-3, 1.2) for _ in range(100))
        series.waits.extend(rng.lognormvariate(-2, 1.5) for _ in range(100))
        minute.append((f"app.tasks:task_number_{number}", series))
    return minute


def measure(url: str, tasks: int) -> tuple[int, int, int]:
    """(used_memory delta, sum of MEMORY USAGE, keys) after a day of one queue."""
    queue = RedisQueue(Config.resolve(redis_url=url))
    queue.client.flushall()
    collector = Collector(queue)
    rng = random.Random(tasks)
    collector._send("default", 0, a_minute(tasks, rng))  # scripts loaded, not counted
    queue.client.flushall()
    before = used_memory(queue)
    first = 29_000_000
    for minute in range(first, first + MINUTES):
        collector._send("default", minute, a_minute(tasks, rng))
    after = used_memory(queue)
    keys = list(queue.client.scan_iter(match="queues:default:metrics*", count=1000))
    usage = sum(int(queue.client.memory_usage(key, samples=0) or 0) for key in keys)
    return after - before, usage, len(keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="1,5", help="task names per queue, comma-separated")
    args = parser.parse_args()
    with RedisServer() as server:
        print(machine_summary(RedisQueue(Config.resolve(redis_url=server.url)).client))
        rows = []
        for tasks in (int(n) for n in args.tasks.split(",")):
            used, usage, keys = measure(server.url, tasks)
            rows.append((tasks, keys, used, usage, used / tasks))
    table(
        ("task names", "keys", "used_memory bytes/day", "MEMORY USAGE sum", "bytes/day per task"),
        rows,
        "One queue's metrics after 24 h of per-minute flushes (1,440 minutes)",
    )


if __name__ == "__main__":
    main()
