"""What 1,000 calls waiting for one slot cost in Redis: ``concurrency=1`` (parked,
woken when the slot frees) against ``WithoutOverlapping`` (locked out, knocking again).

Each round queues 1,000 calls of a task that works a millisecond, one run at a time,
and runs them with real ``rqueue work`` processes (several children racing for the
one slot). Printed per kind, medians of the rounds: the wall time, the script calls
(EVALSHA) and all Redis commands (those run inside scripts included, from INFO
commandstats) per task, everything the worker sent included (reserve, ack, migrate):
the unlimited row is that share.

    python benchmarks/speed/concurrency_waiters.py             # 1,000 calls, 3 rounds
    python benchmarks/speed/concurrency_waiters.py --children 8
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
from common import command_calls, command_delta, machine_summary, median, rqueue_work, table

from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import Task

KINDS: dict[str, Task[..., None]] = {
    "no limit (what any task costs)": bench_tasks.one_ms,
    "concurrency=1 (parked, woken)": bench_tasks.one_at_a_time,
    "WithoutOverlapping (knocks)": bench_tasks.one_at_a_time_locked,
}


def one_round(
    queue: RedisQueue, url: str, task: Task[..., None], calls: int, children: int
) -> tuple[float, float, float]:
    """Seconds, script calls and commands per task, for one round."""
    task.using(connection=queue).dispatch_many([()] * calls)
    keys = queue.keys("default")
    before = command_calls(queue.client)
    start = time.perf_counter()
    worker = rqueue_work(url, children, "--stop-when-drained")
    assert worker.wait(600) == 0, "the worker failed"
    seconds = time.perf_counter() - start
    delta = command_delta(before, command_calls(queue.client))
    assert not (queue.client.llen(keys.ready) or queue.client.zcard(keys.delayed)), "all ran"
    return seconds / calls, delta.get("evalsha", 0) / calls, sum(delta.values()) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000)
    parser.add_argument("--children", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in KINDS}
    with RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        queue = RedisQueue(Config(redis_url=server.url))
        print(machine_summary(queue.client))
        for _ in range(args.rounds):  # kinds alternated: drift hits both alike
            for name, task in KINDS.items():
                queue.client.flushall()
                results[name].append(one_round(queue, server.url, task, args.calls, args.children))
    rows = []
    for name, rounds in results.items():
        seconds, scripts, commands = (median([r[i] for r in rounds]) for i in range(3))
        rows.append([name, f"{seconds * 1000:.2f}", f"{scripts:.2f}", f"{commands:.1f}"])
    rounds = f"medians of {args.rounds} rounds"
    print(f"{args.calls:,} calls for one slot, {args.children} children, {rounds}")
    table(["kind", "ms/task", "scripts/task", "commands/task"], rows)


if __name__ == "__main__":
    main()
