"""Latency: how soon an idle worker starts a task, and how late delayed tasks start.

- Dispatch-to-start: with ``rqueue work`` idle (its child blocked waiting for a
  push), dispatch one task, wait until it reports its start, pause so the child is
  idle again, repeat. Reports p50/p99/max over the samples.
- Delayed: schedule many tasks with ``later()`` for one instant and report how late
  each started after that instant (p50/p99/max). All of them are due together, so the
  tail also includes waiting behind the others. These tasks append their start time
  to a file rather than RPUSH it, so that recording a start costs no round trip.
- The floor: the same wake-up with no queue at all. One plain redis-py process blocks
  in BLPOP; another pushes to it; the woken process makes one more round trip (as a
  worker must, to reserve the task) and reports the time. No design that wakes a
  blocked process through Redis can start a task sooner on the machine.

    python benchmarks/latency.py
    python benchmarks/latency.py --samples 200 --delayed 50   # a quick check
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import datetime
from pathlib import Path

import bench_tasks
import redis
from common import machine_summary, percentile, rqueue_work, table

from rqueue.config import Config
from rqueue.server import RedisServer, stop_process
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

IDLE_PAUSE = 0.005
"""Seconds between samples: enough for the child to go back to its blocking wait."""


def wait_start(client: redis.Redis, timeout: float = 10.0) -> tuple[float, float]:
    """Pop one start report: (started_at, due_at), both epoch seconds."""
    popped = client.blpop([bench_tasks.STARTS], timeout=timeout)
    if popped is None:
        raise TimeoutError("no task started in time")
    started, due = popped[1].split()
    return float(started), float(due)


def dispatch_to_start(client: redis.Redis, samples: int) -> list[float]:
    latencies = []
    for _ in range(samples):
        time.sleep(IDLE_PAUSE)
        sent = time.time()
        bench_tasks.record_start.dispatch()
        started, _ = wait_start(client)
        latencies.append(started - sent)
    return latencies


def delayed_lateness(client: redis.Redis, log: Path, count: int, ahead: float) -> list[float]:
    due = time.time() + ahead
    when = datetime.fromtimestamp(due).astimezone()
    for _ in range(count):
        bench_tasks.log_start.later(when, due)
    sent = time.time()
    if sent > due - 0.2:
        print(f"  ! scheduling took too long ({sent - due + ahead:.2f} s); raise --ahead")
    deadline = due + 30
    while len(lines := log.read_text().splitlines()) < count:
        if time.time() > deadline:
            raise TimeoutError(f"only {len(lines)} of {count} delayed tasks started")
        time.sleep(0.05)
    return [float(started) - float(due_at) for started, due_at in map(str.split, lines)]


def wake_floor(url: str, samples: int) -> list[float]:
    """Push to a process blocked in BLPOP; it makes one round trip more and reports."""
    pid = os.fork()
    if pid == 0:  # the woken side: plain redis-py, no queue
        woken = redis.Redis.from_url(url)
        try:
            while woken.blpop(["floor:go"], timeout=10) is not None:
                woken.ping()
                woken.rpush("floor:back", repr(time.time()))
        finally:
            os._exit(0)
    client = redis.Redis.from_url(url)
    latencies = []
    try:
        for _ in range(samples):
            time.sleep(IDLE_PAUSE)
            sent = time.time()
            client.rpush("floor:go", 1)
            popped = client.blpop(["floor:back"], timeout=10)
            if popped is None:
                raise TimeoutError("the floor process did not answer")
            latencies.append(float(popped[1]) - sent)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return latencies


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000, help="dispatch-to-start samples")
    parser.add_argument("--delayed", type=int, default=200, help="delayed tasks due together")
    parser.add_argument("--ahead", type=float, default=2.0, help="seconds until they are due")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument(
        "--hz",
        type=int,
        default=0,
        help="redis-server --hz (0: Redis's default, 10); it sets how "
        "precisely a blocking wait's timeout fires",
    )
    args = parser.parse_args()

    extra = ("--hz", str(args.hz)) if args.hz else ()
    log = Path(tempfile.mkdtemp(prefix="rqueue-latency-")) / "starts.log"
    log.touch()
    os.environ["START_LOG"] = str(log)  # the worker's children inherit it
    with RedisServer(extra_args=extra) as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        client = redis.Redis.from_url(server.url)
        print(machine_summary(client))
        worker = rqueue_work(server.url, args.concurrency)
        try:
            bench_tasks.record_start.dispatch()  # warm up: children forked and connected
            wait_start(client, timeout=30)
            time.sleep(0.5)
            idle = dispatch_to_start(client, args.samples)
            late = delayed_lateness(client, log, args.delayed, args.ahead)
        finally:
            stop_process(worker)
        floor = wake_floor(server.url, args.samples)
    rows = [
        (
            f"dispatch to start, idle worker ({args.samples} samples)",
            ms(min(idle)),
            ms(percentile(idle, 0.5)),
            ms(percentile(idle, 0.99)),
            ms(max(idle)),
        ),
        (
            f"floor: BLPOP wake-up + 1 round trip, no queue ({args.samples} samples)",
            ms(min(floor)),
            ms(percentile(floor, 0.5)),
            ms(percentile(floor, 0.99)),
            ms(max(floor)),
        ),
        (
            f"delayed task start after due time ({args.delayed} due together)",
            ms(min(late)),
            ms(percentile(late, 0.5)),
            ms(percentile(late, 0.99)),
            ms(max(late)),
        ),
    ]
    table(
        ("measure", "min ms", "p50 ms", "p99 ms", "max ms"),
        rows,
        f"Latency, `rqueue work --concurrency {args.concurrency}`"
        + (f", redis-server --hz {args.hz}" if args.hz else ""),
    )


if __name__ == "__main__":
    main()
