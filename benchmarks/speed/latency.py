"""Latency: how soon an idle worker starts a task, and how late delayed tasks start.

- Dispatch-to-start: with ``rqueue work`` idle (its child blocked waiting for a
  push), dispatch one task, wait until it reports its start, pause so the child is
  idle again, repeat. Reports p50/p99/max over the samples, for a plain task (process
  mode) and for its ``async def`` twin (async mode, ``--slots``), taking turns sample
  by sample so that the machine's drift falls on both alike. A process-mode sample
  then comes 5 ms after an async task ended, while the child still waits for a push
  as its event loop left it (``worker/listener.py``); ``--modes process`` (or
  ``async``) measures one alone, a child that waits as an idle child of its mode does.
- Dispatch-to-start beside a running coroutine: the same ``async def`` task while one
  other holds a slot of the child (blocked in a Redis call), so the child is already
  in async mode when the task arrives.
- Delayed: schedule many tasks with ``later()`` for one instant and report how late
  each started after that instant (p50/p99/max). All of them are due together, so the
  tail also includes waiting behind the others. These tasks append their start time
  to a file rather than RPUSH it, so that recording a start costs no round trip.
- The floor: the same wake-up with no queue at all. One plain redis-py process blocks
  in BLPOP; another pushes to it; the woken process makes one more round trip (as a
  worker did to reserve the task, and still does when a wait covers several queues)
  and reports the time. An idle child of one queue sends its reserve call behind its
  BLPOP (``Reservations.wait_then_reserve``; ``reserve_behind`` as an async or thread
  mode child goes idle), so it can start a task a little sooner than this floor: what
  is left is Python's work on both sides.

    python benchmarks/speed/latency.py
    python benchmarks/speed/latency.py --samples 200 --delayed 50 --busy-samples 50  # quick
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from common import machine_summary, percentile, rqueue_work, table

from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import Task


def dispatch_to_start(
    client: redis.Redis, samples: int, tasks: Sequence[Task[..., object]]
) -> list[list[float]]:
    """``samples`` latencies of each task, the tasks taking turns."""
    latencies: list[list[float]] = [[] for _ in tasks]
    for _ in range(samples):
        for task, measured in zip(tasks, latencies, strict=True):
            time.sleep(bench_tasks.IDLE_PAUSE)
            sent = time.time()
            task.dispatch()
            started, _ = bench_tasks.wait_start(client)
            measured.append(started - sent)
    return latencies


def beside_running_coroutine(client: redis.Redis, samples: int) -> list[float]:
    """Dispatch-to-start of the ``async def`` task while another holds a slot."""
    # Its own timeout: it holds its slot for as long as the samples take.
    bench_tasks.hold_slot.using(timeout=3600).dispatch()
    if client.blpop([bench_tasks.HOLDING], timeout=10) is None:
        raise TimeoutError("the holding task did not start")
    try:
        (latencies,) = dispatch_to_start(client, samples, [bench_tasks.record_start_async])
    finally:
        client.rpush(bench_tasks.RELEASE, 1)
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
            time.sleep(bench_tasks.IDLE_PAUSE)
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


def summary(measure: str, latencies: Sequence[float]) -> tuple[str, ...]:
    """A table row: min, p50, p99 and max in ms."""
    return (
        measure,
        ms(min(latencies)),
        ms(percentile(latencies, 0.5)),
        ms(percentile(latencies, 0.99)),
        ms(max(latencies)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000, help="dispatch-to-start samples")
    parser.add_argument("--delayed", type=int, default=200, help="delayed tasks due together")
    parser.add_argument("--ahead", type=float, default=2.0, help="seconds until they are due")
    parser.add_argument(
        "--modes",
        default="process,async",
        help="process, async, or process,async: both, taking turns (the default)",
    )
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--slots", type=int, default=100, help="rqueue work --slots")
    parser.add_argument(
        "--busy-samples",
        type=int,
        default=200,
        help="samples beside a running coroutine (each may wait out the child's "
        "poll for new tasks while it runs coroutines)",
    )
    parser.add_argument(
        "--hz",
        type=int,
        default=0,
        help="redis-server --hz (0: Redis's default, 10); it sets how "
        "precisely a blocking wait's timeout fires",
    )
    args = parser.parse_args()
    modes = args.modes.split(",")
    if not set(modes) <= {"process", "async"}:
        parser.error(f"--modes: {args.modes!r}; expected process, async or process,async")

    extra = ("--hz", str(args.hz)) if args.hz else ()
    log = Path(tempfile.mkdtemp(prefix="rqueue-latency-")) / "starts.log"
    log.touch()
    os.environ["START_LOG"] = str(log)  # the worker's children inherit it
    with RedisServer(extra_args=extra) as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        client = redis.Redis.from_url(server.url)
        print(machine_summary(client))
        worker = rqueue_work(server.url, args.concurrency, "--slots", str(args.slots))
        both = {"process": bench_tasks.record_start, "async": bench_tasks.record_start_async}
        try:
            for task in both.values():  # warm up: children forked and connected, loop made
                task.dispatch()
                bench_tasks.wait_start(client, timeout=30)
            time.sleep(0.5)
            measured = dispatch_to_start(client, args.samples, [both[m] for m in modes])
            idle = dict(zip(modes, measured, strict=True))
            late = delayed_lateness(client, log, args.delayed, args.ahead)
            busy = beside_running_coroutine(client, args.busy_samples)
        finally:
            stop_process(worker)
        floor = wake_floor(server.url, args.samples)
    alone = "" if len(modes) > 1 else ", alone"
    rows = [
        summary(
            f"dispatch to start, idle worker, {mode} mode{alone} ({args.samples} samples)",
            idle[mode],
        )
        for mode in modes
    ]
    rows += [
        summary(f"floor: BLPOP wake-up + 1 round trip, no queue ({args.samples} samples)", floor),
        summary(f"async mode beside a running coroutine ({args.busy_samples} samples)", busy),
        summary(f"delayed task start after due time ({args.delayed} due together)", late),
    ]
    table(
        ("measure", "min ms", "p50 ms", "p99 ms", "max ms"),
        rows,
        f"Latency, `rqueue work --concurrency {args.concurrency} --slots {args.slots}`"
        + (f", redis-server --hz {args.hz}" if args.hz else ""),
    )


if __name__ == "__main__":
    main()
