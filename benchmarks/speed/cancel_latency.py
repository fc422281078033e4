"""Cancel latency: from ``handle.cancel()`` of a running task to its settled outcome.

For each mode (process mode, ``--threads 2``, ``async def`` tasks on ``--slots``) a
worker with one child runs one long task at a time; once the task reports its start,
the benchmark cancels it and waits until its kept status reads ``cancelled`` (the
worker's parent saw the request, signalled the child, the task stopped and
settle_cancelled.lua ran). Reports min, p50, p99 and max over the samples, per mode.
Most of it is the parent's poll of the requests (``worker/cancels.py``'s ``POLL``):
half of it on average.

    python benchmarks/speed/cancel_latency.py                 # 200 cancels per mode
    python benchmarks/speed/cancel_latency.py --samples 30    # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from common import machine_summary, percentile, rqueue_work, table

from rqueue import current_job, task
from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.cancel import CancelOutcome
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import Task

STARTED = "bench:cancel:started"


@task(keep_result=60)
def sleeps() -> None:
    """Process mode: TaskCancelled is raised inside the sleep."""
    bench_tasks.client().rpush(STARTED, 1)
    time.sleep(60)


@task(keep_result=60)
def polls() -> None:
    """Thread mode: looks at its cancel between short sleeps."""
    bench_tasks.client().rpush(STARTED, 1)
    job = current_job()
    assert job is not None
    for _ in range(6000):
        job.check_cancelled()
        time.sleep(0.01)


@task(keep_result=60)
async def awaits() -> None:
    """Slot mode: its coroutine is cancelled."""
    bench_tasks.client().rpush(STARTED, 1)
    await asyncio.sleep(60)


MODES: dict[str, tuple[Task[..., object], tuple[str, ...]]] = {
    "process": (sleeps, ()),
    "threads": (polls, ("--threads", "2")),
    "slots": (awaits, ("--slots", "10")),
}


def cancel_latencies(client: redis.Redis, sample: Task[..., object], samples: int) -> list[float]:
    latencies = []
    for _ in range(samples):
        handle = sample.dispatch()
        if client.blpop([STARTED], timeout=30) is None:
            raise TimeoutError("the task did not start")
        asked = time.perf_counter()
        if handle.cancel() is not CancelOutcome.CANCELLING:
            raise RuntimeError("the running task's cancel was not delivered")
        deadline = asked + 10
        while handle.status() != "cancelled":
            if time.perf_counter() > deadline:
                raise TimeoutError("the cancelled task did not stop")
            time.sleep(0.002)
        latencies.append(time.perf_counter() - asked)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200, help="cancels per mode")
    args = parser.parse_args()
    rows = []
    with RedisServer() as server:
        use(RedisQueue(Config(redis_url=server.url)))
        client = redis.Redis.from_url(server.url)
        print(machine_summary(client))
        for mode, (sample, options) in MODES.items():
            worker = rqueue_work(server.url, 1, "--kill-grace", "5", *options)
            try:
                measured = cancel_latencies(client, sample, args.samples)
            finally:
                stop_process(worker)
            rows.append(
                (
                    f"{mode} ({args.samples} cancels)",
                    *(
                        f"{seconds * 1000:.1f}"
                        for seconds in (
                            min(measured),
                            percentile(measured, 0.5),
                            percentile(measured, 0.99),
                            max(measured),
                        )
                    ),
                )
            )
    table(
        ("mode", "min ms", "p50 ms", "p99 ms", "max ms"),
        rows,
        "Cancel latency: handle.cancel() of a running task to its status reading cancelled",
    )


if __name__ == "__main__":
    main()
