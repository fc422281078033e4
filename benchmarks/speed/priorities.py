"""Priority levels (``@task(priority=N)``): what a backlog of low-priority tasks costs a
high-priority one, and what levels cost throughput.

- Dispatch-to-start of a ``priority=0`` task, as ``latency.py`` measures it (dispatch,
  wait for its start report, pause, repeat), on an empty queue and then with
  ``--backlog`` ``priority=9`` empty tasks queued, which the worker is working
  through meanwhile (refilled whenever it drops under half). The two rows take
  turns, round by round, so the machine's drift falls on both alike. A child
  holding a prefetched batch of low tasks runs it first: ``--prefetch`` bounds that.
- Throughput: ``--tasks`` empty tasks drained by one ``rqueue work --stop-when-empty``,
  all without a priority, then the same count spread over levels 0-9 (pushed
  priority by priority, interleaved), alternating ``--rounds`` times. That figure
  includes the worker's start and its check for an empty queue; the same two drained
  by one worker child in this process (``hot_path.py``'s way) leaves them out, and
  shows what a child taking small batches of a queue with levels costs
  (``worker/held_work.py``).

    python benchmarks/speed/priorities.py
    python benchmarks/speed/priorities.py --samples 100 --rounds 2 --tasks 20000  # quick
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from common import machine_summary, median, percentile, rqueue_work, table
from in_process import drain, in_process_child

from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import dispatch_many


def fill(count: int, level: int | None) -> None:
    """Queue ``count`` empty tasks at ``level`` (None: no priority), 10,000 a call."""
    low = bench_tasks.empty.using(priority=level)
    for start in range(0, count, 10_000):
        dispatch_many([low.pending() for _ in range(min(10_000, count - start))])


def latencies(client: redis.Redis, queue: RedisQueue, samples: int, backlog: int) -> list[float]:
    """Dispatch-to-start of ``samples`` priority-0 tasks, with ``backlog`` low ones queued
    (0: the queue empty)."""
    urgent = bench_tasks.record_start.using(priority=0)
    measured = []
    for _ in range(samples):
        if backlog and queue.sizes(["default"])[0].ready < backlog // 2:
            fill(backlog - queue.sizes(["default"])[0].ready, 9)
        time.sleep(bench_tasks.IDLE_PAUSE)
        sent = time.time()
        urgent.dispatch()
        started, _ = bench_tasks.wait_start(client, timeout=30)
        measured.append(started - sent)
    return measured


def drained(url: str, queue: RedisQueue, tasks: int, levels: bool) -> float:
    """Tasks per second one worker drains, of ``tasks`` queued with or without levels."""
    if levels:
        for level in range(10):
            fill(tasks // 10, level)
    else:
        fill(tasks, None)
    began = time.perf_counter()
    worker = rqueue_work(url, 1, "--stop-when-empty", "--no-metrics")
    if worker.wait(600) != 0:
        raise RuntimeError("the worker failed")
    return tasks / (time.perf_counter() - began)


def drained_in_process(url: str, tasks: int, rounds: int) -> tuple[list[float], list[float]]:
    """Tasks per second one in-process child drains, without levels and with them,
    alternating ``rounds`` times: one child each, as a child that found levels on a
    queue keeps taking small batches there."""
    children = {levels: in_process_child(url) for levels in (False, True)}
    rates: dict[bool, list[float]] = {False: [], True: []}
    for round_number in range(rounds):
        for levels in (False, True) if round_number % 2 == 0 else (True, False):
            for level in range(10) if levels else [None]:
                fill(tasks // 10 if levels else tasks, level)
            _, wall = drain(children[levels], tasks)
            rates[levels].append(tasks / wall)
    return rates[False], rates[True]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300, help="latency samples per row")
    parser.add_argument("--backlog", type=int, default=100_000, help="low tasks queued")
    parser.add_argument("--prefetch", type=int, default=100, help="rqueue work --prefetch")
    parser.add_argument("--tasks", type=int, default=50_000, help="tasks per throughput run")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        client = redis.Redis.from_url(server.url)
        print(machine_summary(client))
        worker = rqueue_work(server.url, 1, "--prefetch", str(args.prefetch))
        empty: list[float] = []
        behind: list[float] = []
        try:
            bench_tasks.record_start.dispatch()  # warm up: child forked and connected
            bench_tasks.wait_start(client, timeout=30)
            per_round = max(1, args.samples // args.rounds)
            for _ in range(args.rounds):
                queue.clear("default")
                empty += latencies(client, queue, per_round, 0)
                behind += latencies(client, queue, per_round, args.backlog)
            queue.clear("default")
        finally:
            stop_process(worker)
        plain: list[float] = []
        leveled: list[float] = []
        for _ in range(args.rounds):
            plain.append(drained(server.url, queue, args.tasks, levels=False))
            leveled.append(drained(server.url, queue, args.tasks, levels=True))
        plain_here, leveled_here = drained_in_process(server.url, args.tasks, args.rounds)

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:.2f}"

    table(
        ("priority-0 dispatch to start", "samples", "p50 ms", "p99 ms", "max ms"),
        [
            (name, len(values), *(ms(percentile(values, f)) for f in (0.5, 0.99)), ms(max(values)))
            for name, values in (
                ("empty queue", empty),
                (f"{args.backlog:,} priority-9 tasks queued, worker busy", behind),
            )
        ],
        title=f"Latency (one child, --prefetch {args.prefetch})",
    )
    table(
        ("tasks", "rounds", "tasks/s median", "each round"),
        [
            ("no priority", len(plain), f"{median(plain):,.0f}", [round(x) for x in plain]),
            ("levels 0-9", len(leveled), f"{median(leveled):,.0f}", [round(x) for x in leveled]),
        ],
        title=f"Throughput, one worker child draining {args.tasks:,} empty tasks",
    )
    table(
        ("tasks", "rounds", "tasks/s median", "each round"),
        [
            (name, len(rates), f"{median(rates):,.0f}", [round(x) for x in rates])
            for name, rates in (("no priority", plain_here), ("levels 0-9", leveled_here))
        ],
        title=f"Throughput, one worker child in this process draining {args.tasks:,} empty tasks",
    )


if __name__ == "__main__":
    main()
