"""Depth: does a task cost more when millions are already queued?

For each depth D (10, 10^4, 10^6; 10^7 with ``--max-depth 1e7``) the queue ``default``
is filled with ``bench_tasks.empty`` through ``dispatch_many`` (10,000 calls each), then:

- dispatch: ``task.dispatch()`` of one more task into that queue, timed call by call
  (``--samples``, which stay queued behind the D): the push into a list of D entries
  and a pending-ids set of D ids;
- throughput: a real ``rqueue work default --concurrency 2`` takes the first
  ``--tasks`` (20,000) from the head of the queue, the D behind them staying queued;
  the steady rate is from the first task taken to the last of those done (a task is
  done once it left both the list and the reserved set), then the worker is stopped;
- latency beside the deep queue: ``rqueue work probe,default`` drains ``default``
  (topped up by ``--tasks`` first, so it stays busy) while a ``record_start`` task is
  dispatched to ``probe``, the queue it serves first; dispatch-to-start p50/p99, each
  sample as latency.py takes them (dispatch, wait for its start, 5 ms pause). The
  sampled task never waits behind the D: what this shows is whether a deep queue slows
  a worker's reserve calls, or its hand-over to a queue of higher priority (at most one
  batch of ``default`` in hand);
- idle latency: ``rqueue work probe --concurrency 1``, idle, the D left in ``default``
  (a queue it does not serve): latency.py's figure, with the deep queue in the same Redis.

A task behind the D in its own queue starts after D / throughput seconds: that wait is
the throughput column, not a cost per task. Beside the throughput, Redis's own time per
task over the same stretch (``INFO commandstats``, reset before it): what the script
calls cost the server, apart from the workers' CPU and the machine's drift. The slope
of each cost is fitted over log10(D), so "flat" reads as a slope near zero.

    python benchmarks/scale/scale_depth.py                    # 10, 10^4, 10^6
    python benchmarks/scale/scale_depth.py --max-depth 1e7    # and 10^7 (2.5 GB of Redis)
    python benchmarks/scale/scale_depth.py --max-depth 1e4 --tasks 2000 --samples 50  # quick
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from common import machine_summary, percentile, rqueue_work, table, wait_until

from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.keys import QueueKeys
from rqueue.store.queue import RedisQueue

DEEP, PROBE = "default", "probe"
KEYS = QueueKeys.for_queue(DEEP)
FILL_CHUNK = 10_000
"""Calls per ``dispatch_many`` when filling (pushed 1,000 per script call)."""


@dataclass(frozen=True)
class DepthRow:
    depth: int
    fill_rate: float
    """Tasks per second that ``dispatch_many`` queued while filling."""
    dispatch_us: tuple[float, float]
    """One ``task.dispatch()`` into the deep queue: p50, p99 (µs)."""
    throughput: float
    """Tasks per second, steady, over the first ``tasks`` of the deep queue."""
    redis_us: tuple[float, float]
    """Redis's own time per task meanwhile (µs, INFO commandstats): in every script
    call, and in the SREMs that take the reserved tasks' ids out of the pending-ids set."""
    busy_ms: tuple[float, float, int]
    """Dispatch-to-start of the probe while the deep queue is worked: p50, p99 (ms), samples."""
    idle_ms: tuple[float, float, int]
    """The same with an idle worker serving only the probe queue."""


def fill(count: int) -> float:
    """Queue ``count`` empty tasks; the rate they went in at (tasks per second)."""
    started = time.perf_counter()
    for start in range(0, count, FILL_CHUNK):
        bench_tasks.empty.dispatch_many([()] * min(FILL_CHUNK, count - start))
    return count / (time.perf_counter() - started)


def dispatch_times(samples: int) -> tuple[float, float]:
    """p50 and p99 of one ``dispatch()`` into the deep queue, in µs."""
    bench_tasks.empty.dispatch()  # its script loaded, its queue registered: not timed
    took = []
    for _ in range(samples):
        started = time.perf_counter()
        bench_tasks.empty.dispatch()
        took.append((time.perf_counter() - started) * 1e6)
    return percentile(took, 0.5), percentile(took, 0.99)


def queued(client: redis.Redis) -> int:
    """Tasks not done yet: in the list, or reserved and not acked."""
    pipe = client.pipeline(transaction=False)
    pipe.llen(KEYS.ready)
    pipe.zcard(KEYS.reserved)
    ready, reserved = pipe.execute()
    return int(ready) + int(reserved)


def throughput(
    url: str, client: redis.Redis, tasks: int, concurrency: int
) -> tuple[float, tuple[float, float]]:
    """Steady tasks per second over the first ``tasks`` of the queue, and Redis's µs
    per task meanwhile (see ``DepthRow.redis_us``)."""
    total = queued(client)
    client.config_resetstat()
    worker = rqueue_work(url, concurrency)
    try:
        first = wait_until(lambda: client.llen(KEYS.ready) < total, timeout=60, interval=0.001)
        done = wait_until(lambda: total - queued(client) >= tasks, timeout=600, interval=0.002)
        stats = client.info("commandstats")
    finally:
        stop_process(worker)
    spent = {name: float(v["usec"]) / tasks for name, v in stats.items()}
    return tasks / (done - first), (spent["cmdstat_evalsha"], spent["cmdstat_srem"])


def probe_latency(
    url: str, client: redis.Redis, queues: str, concurrency: int, samples: int, busy_for: int
) -> tuple[float, float, int]:
    """Dispatch-to-start of ``record_start`` on the probe queue: p50, p99 (ms), samples.

    ``busy_for``: sample only while the worker has not yet done that many tasks of the
    deep queue (0: no such limit), so every sample is taken beside a busy worker.
    """
    probe = bench_tasks.record_start.on_queue(PROBE)
    client.delete(bench_tasks.STARTS)
    total = queued(client)
    worker = rqueue_work(url, concurrency, queue=queues)
    latencies: list[float] = []
    try:
        probe.dispatch()  # warm up: children forked and connected
        bench_tasks.wait_start(client, timeout=30)
        while len(latencies) < samples:
            if busy_for and total - queued(client) >= busy_for:
                break
            time.sleep(bench_tasks.IDLE_PAUSE)
            sent = time.time()
            probe.dispatch()
            started, _ = bench_tasks.wait_start(client)
            latencies.append((started - sent) * 1000)
    finally:
        stop_process(worker)
    return percentile(latencies, 0.5), percentile(latencies, 0.99), len(latencies)


def measure(
    url: str, client: redis.Redis, depth: int, tasks: int, samples: int, concurrency: int
) -> DepthRow:
    client.flushall(asynchronous=False)
    fill_rate = fill(depth + tasks)
    dispatch_us = dispatch_times(samples)
    rate, redis_us = throughput(url, client, tasks, concurrency)
    fill(max(0, depth + tasks - queued(client)))  # topped up: busy for ``tasks`` more
    busy = probe_latency(url, client, f"{PROBE},{DEEP}", concurrency, samples, tasks)
    fill(max(0, depth - queued(client)))
    idle = probe_latency(url, client, PROBE, 1, samples, 0)
    return DepthRow(depth, fill_rate, dispatch_us, rate, redis_us, busy, idle)


def slope(depths: Sequence[int], values: Sequence[float]) -> float:
    """Least-squares slope of ``values`` over log10(depth): change per decade."""
    xs = [math.log10(d) for d in depths]
    mean_x, mean_y = sum(xs) / len(xs), sum(values) / len(values)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, values, strict=True)) / spread


def run(
    depths: Sequence[int], tasks: int = 20_000, samples: int = 200, concurrency: int = 2
) -> list[DepthRow]:
    """One row per depth, printed as each is measured."""
    rows = []
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        use(RedisQueue(Config(redis_url=server.url)))
        print(machine_summary(client), flush=True)
        for depth in depths:
            row = measure(server.url, client, depth, tasks, samples, concurrency)
            print(
                f"  depth {depth:,}: {row.throughput:,.0f} tasks/s, idle p50 "
                f"{row.idle_ms[0]:.2f} ms, beside it p50 {row.busy_ms[0]:.2f} ms",
                flush=True,
            )
            rows.append(row)
            memory = client.info("memory")["used_memory_human"]
            print(f"    Redis used_memory at that depth: {memory}", flush=True)
    return rows


def print_rows(rows: Sequence[DepthRow], tasks: int, concurrency: int) -> None:
    table(
        (
            "tasks queued (D)",
            "fill, tasks/s",
            "dispatch p50 µs",
            "dispatch p99 µs",
            "tasks/s",
            "µs per task",
            "Redis µs per task",
            "of it SREM",
            "beside it p50 ms",
            "beside it p99 ms",
            "samples",
            "idle p50 ms",
            "idle p99 ms",
            "samples",
        ),
        [
            (
                r.depth,
                r.fill_rate,
                f"{r.dispatch_us[0]:.0f}",
                f"{r.dispatch_us[1]:.0f}",
                r.throughput,
                f"{1e6 / r.throughput:.1f}",
                *(f"{v:.1f}" for v in r.redis_us),
                *(f"{v:.2f}" for v in r.busy_ms[:2]),
                r.busy_ms[2],
                *(f"{v:.2f}" for v in r.idle_ms[:2]),
                r.idle_ms[2],
            )
            for r in rows
        ],
        f"Cost with D tasks already queued (tasks/s: `rqueue work --concurrency {concurrency}` "
        f"on the first {tasks:,} empty tasks, D behind them; beside it: a task on a queue "
        "served first while the deep one is worked; idle: a worker serving only that queue)",
    )
    if len(rows) < 2:
        return
    depths = [r.depth for r in rows]
    slopes = [
        ("µs per task (1 / tasks/s)", slope(depths, [1e6 / r.throughput for r in rows]), "µs"),
        ("Redis µs per task", slope(depths, [r.redis_us[0] for r in rows]), "µs"),
        ("of it SREM", slope(depths, [r.redis_us[1] for r in rows]), "µs"),
        ("dispatch p50", slope(depths, [r.dispatch_us[0] for r in rows]), "µs"),
        ("beside it p50", slope(depths, [r.busy_ms[0] * 1000 for r in rows]), "µs"),
        ("idle p50", slope(depths, [r.idle_ms[0] * 1000 for r in rows]), "µs"),
    ]
    table(
        ("cost", "slope per decade of depth"),
        [(name, f"{value:+.2f} {unit}") for name, value, unit in slopes],
        "Slopes (least squares over log10 D; flat is near zero)",
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--max-depth", type=float, default=1e6, help="deepest queue (powers: 10, 1e4, 1e6, 1e7)"
    )
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks the throughput counts")
    parser.add_argument("--samples", type=int, default=200, help="latency and dispatch samples")
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args(argv)
    depths = [d for d in (10, 10_000, 1_000_000, 10_000_000) if d <= args.max_depth]
    rows = run(depths, args.tasks, args.samples, args.concurrency)
    print_rows(rows, args.tasks, args.concurrency)


if __name__ == "__main__":
    main()
