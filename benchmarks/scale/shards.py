"""Shards: three queues on a 3-master Redis Cluster, beside the same queues on one Redis.

The queue names are chosen so that each queue's ready key (``queues:{name}``) hashes
into a different master's slot range. For each topology, in one run:

- dispatch: one producer process per queue, ``dispatch_many`` of 1,000 tasks a call;
- processing: one ``rqueue work <queue> --stop-when-empty`` per queue, so every shard
  has a consumer of its own at once (one worker serving all three queues drains them
  in priority order, one shard at a time, and could not show shards working together);
- Redis CPU per task on each master: the main thread's ``used_cpu_sys + used_cpu_user``
  (INFO CPU) over each phase, divided by the tasks of that master's queues;
- projected scaling: Redis runs commands on one thread, so a shard saturates at one
  CPU-second per second, i.e. at 1 / (CPU per task) tasks/s. On this 2-core machine
  the shards, producers and workers share two cores, so the measured rates cannot
  show that; the projection assumes each shard gets a core of its own and enough
  producers and workers elsewhere, with the queues spread evenly over the shards;
- pickup latency per queue: one idle ``rqueue work q1,q2,q3``; one task at a time is
  dispatched to each queue in turn, and its start (recorded in the book, a plain
  redis-server: bookkeeping.py) is compared with its dispatch.

Both topologies run with ``appendonly yes`` (the cluster nodes' setting) and no
replicas, so a master does the same work as the single server.

    python benchmarks/scale/shards.py
    python benchmarks/scale/shards.py --tasks 5000 --samples 100   # a quick check
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from bookkeeping import book, open_book
from common import (
    BENCH_DIR,
    machine_summary,
    percentile,
    rqueue_work,
    run_at_once,
    table,
    wait_until,
)
from in_process import fill

from rqueue import task
from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.keys import QueueKeys
from rqueue.store.queue import RedisQueue

sys.path.insert(0, str(BENCH_DIR.parent / "tests"))  # the tests' local topologies
from topologies import LocalCluster

SHARDS = 3
PAUSE = 0.01
"""Seconds between pickup samples: the worker's child is blocked waiting again."""


@task
def pickup_probe(sent: float) -> None:
    """Record when this task started beside when it was sent (read by bench_tasks.wait_start)."""
    book().rpush(bench_tasks.STARTS, f"{time.time()!r} {sent!r}")


@dataclass
class Shard:
    """One Redis process and the queues whose keys it serves."""

    address: str
    client: redis.Redis
    queues: list[str]

    def cpu(self) -> float:
        """CPU seconds of Redis's main thread so far (where commands run)."""
        info = self.client.info("cpu")
        return float(
            info.get("used_cpu_sys_main_thread", info["used_cpu_sys"])
            + info.get("used_cpu_user_main_thread", info["used_cpu_user"])
        )


@dataclass
class Setup:
    label: str
    url: str
    shards: list[Shard]

    @property
    def queues(self) -> list[str]:
        return [name for shard in self.shards for name in shard.queues]


@dataclass
class Measured:
    setup: Setup
    dispatch_rate: float
    processing_rate: float
    cpu_dispatch: list[float]
    """Per shard, CPU seconds over the dispatch phase."""
    cpu_processing: list[float]
    pickup: dict[str, list[float]]


def spread_queues(cluster: LocalCluster) -> list[Shard]:
    """One queue per master: the first names whose ready key lands on each."""
    found: dict[int, Shard] = {}
    for index in range(1000):
        name = f"shard{index}"
        node = cluster.master_of(QueueKeys.for_queue(name, "", cluster=True).ready)
        if node.port not in found:
            client = redis.Redis(node.host, node.port)
            found[node.port] = Shard(f"{node.host}:{node.port}", client, [name])
        if len(found) == SHARDS:
            return list(found.values())
    raise RuntimeError(f"no {SHARDS} names found that land on {SHARDS} masters")


@contextmanager
def cluster_setup() -> Iterator[Setup]:
    with LocalCluster(SHARDS, replicas_per_master=0) as cluster:
        yield Setup(f"{SHARDS}-master cluster", cluster.seed_url, spread_queues(cluster))


@contextmanager
def single_setup(queues: list[str]) -> Iterator[Setup]:
    with RedisServer(extra_args=("--appendonly", "yes")) as server:
        client = redis.Redis.from_url(server.url)
        yield Setup("one Redis", server.url, [Shard(f"127.0.0.1:{server.port}", client, queues)])


# -- dispatch: one producer process per queue ------------------------------------------


def _produce(url: str, queue: str, count: int, ready: Any, go: Any, done: Any) -> None:
    connection = RedisQueue(Config(redis_url=url))
    connection.remember_queues([queue])  # not timed: the first dispatch would do it
    ready.release()
    go.wait()
    task = bench_tasks.empty.using(queue=queue, connection=connection)
    fill(lambda calls: task.dispatch_many([()] * calls), count)
    done.put(time.perf_counter())


def dispatch(setup: Setup, count: int) -> float:
    """Tasks/s of one producer process per queue, all started at once."""
    argsets = [(setup.url, name, count) for name in setup.queues]
    return count * len(argsets) / run_at_once(_produce, argsets)


# -- processing: one worker per queue --------------------------------------------------


def process(setup: Setup, connection: RedisQueue, count: int, concurrency: int) -> float:
    """Tasks/s from the first task taken to the last acknowledged, over all queues."""
    total = count * len(setup.queues)
    workers = [
        rqueue_work(setup.url, concurrency, "--stop-when-empty", queue=name)
        for name in setup.queues
    ]
    first = 0.0

    def drained() -> bool:
        nonlocal first
        sizes = connection.sizes(setup.queues)
        if not first and sum(s.ready for s in sizes) < total:
            first = time.perf_counter()
        if all(w.poll() is not None for w in workers) and any(s.ready for s in sizes):
            raise RuntimeError(f"the workers exited with tasks left: {sizes}")
        return all(s.ready == 0 and s.reserved == 0 for s in sizes)

    try:
        done = wait_until(drained, timeout=600, interval=0.02)
        for worker in workers:  # --stop-when-empty: each exits once its queue is empty
            worker.wait(60)
    finally:
        for worker in workers:
            stop_process(worker)
    return total / (done - first)


# -- pickup latency: one idle worker serving every queue -----------------------------


def pickup(setup: Setup, connection: RedisQueue, samples: int) -> dict[str, list[float]]:
    """Dispatch-to-start seconds per queue, one task at a time, the queues in turn."""
    probes = {name: pickup_probe.using(queue=name, connection=connection) for name in setup.queues}
    records = book()
    latencies: dict[str, list[float]] = {name: [] for name in setup.queues}
    worker = rqueue_work(setup.url, 1, queue=",".join(setup.queues))
    try:
        for probe in probes.values():  # warm up: the child forked, every wait connected
            probe.dispatch(time.time())
            bench_tasks.wait_start(records, timeout=30)
        time.sleep(0.5)
        for _ in range(samples):
            for name, probe in probes.items():
                time.sleep(PAUSE)
                sent = time.time()
                probe.dispatch(sent)
                started, _ = bench_tasks.wait_start(records)
                latencies[name].append(started - sent)
    finally:
        stop_process(worker)
    return latencies


def measure(setup: Setup, count: int, concurrency: int, samples: int) -> Measured:
    connection = RedisQueue(Config(redis_url=setup.url))
    print(f"{setup.label}: queues {', '.join(setup.queues)}", flush=True)
    before = [shard.cpu() for shard in setup.shards]
    dispatch_rate = dispatch(setup, count)
    middle = [shard.cpu() for shard in setup.shards]
    print(f"  dispatched {count * len(setup.queues):,} at {dispatch_rate:,.0f}/s", flush=True)
    processing_rate = process(setup, connection, count, concurrency)
    after = [shard.cpu() for shard in setup.shards]
    print(f"  processed at {processing_rate:,.0f}/s", flush=True)
    latencies = pickup(setup, connection, samples)
    connection.client.close()
    return Measured(
        setup,
        dispatch_rate,
        processing_rate,
        [m - b for b, m in zip(before, middle, strict=True)],
        [a - m for m, a in zip(middle, after, strict=True)],
        latencies,
    )


# -- the report --------------------------------------------------------------------------


def micros(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def ceilings(result: Measured, count: int) -> list[float]:
    """Per shard, the tasks/s at which its main thread would be busy all the time."""
    return [
        len(shard.queues) * count / (dispatched + processed)
        for shard, dispatched, processed in zip(
            result.setup.shards, result.cpu_dispatch, result.cpu_processing, strict=True
        )
    ]


def report(results: list[Measured], args: argparse.Namespace) -> None:
    count = args.tasks
    table(
        ("topology", "tasks", "dispatch tasks/s", "processing tasks/s"),
        [
            (r.setup.label, count * len(r.setup.queues), r.dispatch_rate, r.processing_rate)
            for r in results
        ],
        f"Throughput: {SHARDS} queues, a producer process and a worker "
        f"(--concurrency {args.concurrency}) per queue, all on this machine's cores",
    )
    cpu_rows: list[tuple[Any, ...]] = []
    for result in results:
        for shard, dispatched, processed, ceiling in zip(
            result.setup.shards,
            result.cpu_dispatch,
            result.cpu_processing,
            ceilings(result, count),
            strict=True,
        ):
            tasks = len(shard.queues) * count
            cpu_rows.append(
                (
                    result.setup.label,
                    shard.address,
                    ",".join(shard.queues),
                    micros(dispatched / tasks),
                    micros(processed / tasks),
                    micros((dispatched + processed) / tasks),
                    ceiling,
                )
            )
    table(
        (
            "topology",
            "Redis",
            "queues",
            "dispatch us/task",
            "processing us/task",
            "total us/task",
            "saturates at tasks/s",
        ),
        cpu_rows,
        "Redis main-thread CPU per task (INFO CPU deltas / tasks of that Redis's queues)",
    )
    single = next(r for r in results if len(r.setup.shards) == 1)
    cluster = next(r for r in results if len(r.setup.shards) > 1)
    per_shard = ceilings(cluster, count)
    added = sum(per_shard) / len(per_shard)
    table(
        ("shards", "projected tasks/s"),
        [
            ("1 (one Redis, no cluster)", ceilings(single, count)[0]),
            *((f"{k} (cluster)", k * added) for k in (1, 2, 3, 6)),
        ],
        f"Projected ceiling: +{added:,.0f} tasks/s per added shard. Assumes each shard has a "
        "core of its own, the queues are spread evenly over the shards, and producers and "
        "workers run elsewhere in sufficient number: then the Redis main thread is the "
        "limit, at 1 CPU-second per second",
    )
    pickup_rows = []
    for result in results:
        for shard in result.setup.shards:
            for name in shard.queues:
                values = result.pickup[name]
                pickup_rows.append(
                    (
                        result.setup.label,
                        name,
                        shard.address,
                        len(values),
                        ms(percentile(values, 0.5)),
                        ms(percentile(values, 0.99)),
                        ms(max(values)),
                    )
                )
    table(
        ("topology", "queue", "served by", "samples", "p50 ms", "p99 ms", "max ms"),
        pickup_rows,
        "Pickup latency: dispatch to start, one idle `rqueue work "
        f"{','.join(cluster.setup.queues)}` (goal: p99 < 5 ms for every queue)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks per queue")
    parser.add_argument("--concurrency", type=int, default=1, help="children per worker")
    parser.add_argument("--samples", type=int, default=300, help="pickup samples per queue")
    args = parser.parse_args()
    print(f"command: python benchmarks/scale/shards.py {' '.join(sys.argv[1:])}".rstrip())
    results = []
    with open_book() as records:
        print(machine_summary(records), flush=True)
        with cluster_setup() as setup:
            results.append(measure(setup, args.tasks, args.concurrency, args.samples))
        with single_setup(results[0].setup.queues) as setup:
            results.append(measure(setup, args.tasks, args.concurrency, args.samples))
        print(f"load after the run: {machine_summary().rpartition(', ')[2]}")
    report(results, args)


if __name__ == "__main__":
    main()
