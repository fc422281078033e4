"""Memory of a worker child in async mode: RSS (and USS) with every slot busy.

``rqueue work --concurrency C --slots S`` gets C x S ``bench_tasks.hold_slot`` tasks in
one push; each reports its start on the ``redis.asyncio`` client, then waits in a
Redis call (BLPOP) until released, as a task awaiting a database would, so every slot
holds a coroutine and a connection of its own. Once all have started, each child's
memory is sampled for ``--hold`` seconds and its peak printed, beside the same child
idle (after one warm-up task each, so the event loop and the client exist) and after
the tasks are released. RSS counts pages shared with the parent since the fork too;
USS only the child's own.

    python benchmarks/scale/slot_memory.py
    python benchmarks/scale/slot_memory.py --slots 500 --prefetch 500
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import psutil
import redis
from common import machine_summary, rqueue_work, table, wait_until

from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

MB = 2**20


def memory(pids: list[int]) -> dict[int, tuple[int, int]]:
    """(RSS, USS) in bytes per pid."""
    found = {}
    for pid in pids:
        info = psutil.Process(pid).memory_full_info()
        found[pid] = (info.rss, info.uss)
    return found


def holding(client: redis.Redis) -> Counter[int]:
    """Tasks started so far, per child pid."""
    return Counter(int(line.split()[0]) for line in client.lrange(bench_tasks.HOLDING, 0, -1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--slots", type=int, default=100)
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--hold", type=float, default=3.0, help="seconds to sample, all busy")
    args = parser.parse_args()
    busy_total = args.concurrency * args.slots

    with RedisServer() as server:
        use(RedisQueue(Config(redis_url=server.url)))
        client = redis.Redis.from_url(server.url)
        print(machine_summary(client))
        worker = rqueue_work(
            server.url,
            args.concurrency,
            "--slots",
            str(args.slots),
            "--prefetch",
            str(args.prefetch),
        )
        try:
            # Warm up: one held task at a time until each child runs one (a child blocked
            # on a push most likely wins the next), so each has made its loop and client.
            parent = psutil.Process(worker.pid)
            wait_until(lambda: len(parent.children()) == args.concurrency, 30)
            children = sorted(p.pid for p in parent.children())
            warm_up = 0
            while set(holding(client)) != set(children) and warm_up < 50:
                bench_tasks.hold_slot.dispatch()
                warm_up += 1
                wait_until(lambda n=warm_up: sum(holding(client).values()) == n, 30)
            client.rpush(bench_tasks.RELEASE, *[1] * warm_up)
            wait_until(lambda: client.llen(bench_tasks.RELEASE) == 0, 30)
            time.sleep(0.5)
            idle = memory(children)
            client.delete(bench_tasks.HOLDING)

            bench_tasks.hold_slot.dispatch_many([()] * busy_total)
            started = time.perf_counter()
            wait_until(lambda: sum(holding(client).values()) == busy_total, 60)
            filled = time.perf_counter() - started
            per_child = holding(client)
            peak: dict[int, tuple[int, int]] = {}
            until = time.perf_counter() + args.hold
            while time.perf_counter() < until:
                for pid, (rss, uss) in memory(children).items():
                    old_rss, old_uss = peak.get(pid, (0, 0))
                    peak[pid] = (max(rss, old_rss), max(uss, old_uss))
                time.sleep(0.1)
            client.rpush(bench_tasks.RELEASE, *[1] * busy_total)
            wait_until(lambda: client.llen(bench_tasks.RELEASE) == 0, 60)
            time.sleep(0.5)
            after = memory(children)
        finally:
            stop_process(worker)

    table(
        (
            "child",
            "tasks running",
            "RSS idle MB",
            "RSS busy MB (peak)",
            "RSS after MB",
            "USS idle MB",
            "USS busy MB (peak)",
        ),
        [
            (
                str(pid),
                per_child[pid],
                idle[pid][0] / MB,
                peak[pid][0] / MB,
                after[pid][0] / MB,
                idle[pid][1] / MB,
                peak[pid][1] / MB,
            )
            for pid in children
        ],
        f"Worker children of `rqueue work --concurrency {args.concurrency} --slots "
        f"{args.slots} --prefetch {args.prefetch}`, every slot busy ({busy_total} tasks "
        f"started in {filled:.2f} s, each blocked in a Redis call; sampled for "
        f"{args.hold:g} s)",
    )


if __name__ == "__main__":
    main()
