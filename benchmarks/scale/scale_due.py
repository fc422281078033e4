"""A million delayed tasks due at once, and one worker serving thousands of queues (#16)::

    python benchmarks/scale/scale_due.py due --tasks 1000000
    python benchmarks/scale/scale_due.py queues --queues 10,100,1000,10000 --tasks 1000
    python benchmarks/scale/scale_due.py queues --queues 100,2000,10000 --tasks 100 --cluster

``due``: ``--tasks`` delayed tasks become due at the same instant on queue ``bulk``
while one ``rqueue work other,bulk`` runs. They are pushed beforehand to a queue no
worker serves, each due a millisecond later; then that queue's delayed set (and its
pending ids) is renamed to ``bulk``'s, which is one O(1) step, and its timer list is
pushed, as a push that moves the earliest due time does. Reported: the seconds until
the worker parent's migrate calls (migrate.lua, ``Supervisor._migrate``) have moved
every one to the ready list, the slowest single Redis call meanwhile (SLOWLOG,
``slowlog-log-slower-than`` 100 us, reset at the rename) and how many took over 1 and
5 ms, and the dispatch-to-start latency of an ``other`` task dispatched every 20 ms
before and meanwhile (the same worker, ``other`` first in its list).

``queues``: one worker child in this process (as ``hot_path.py`` runs it) serving
``--queues`` queues, ``--tasks`` empty tasks placed in the first queue of its list,
in the last, or spread evenly over all (one queue in ``queues / tasks``, or every
queue if there are fewer than tasks); per task, the child's CPU, its round trips to
Redis and Redis's own CPU (INFO ``used_cpu_*``). Also the cost of one pass of the
parent's tick over those queues (its migrate calls and registry check-in), and the
round trips and CPU of an idle child's fifth second: it looks for tasks in every
queue (a reserve call each up to 16 queues, a probe of their lengths above:
``worker/queue_order.py``), then blocks for a push (on a cluster, above 64 queues it
polls: ``store/waits.py``). ``--cluster`` runs it on a local 3-master Redis Cluster
(the tests' ``LocalCluster``), Redis's CPU summed over the masters.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from common import BENCH_DIR, Requests, machine_summary, percentile, rqueue_work, table
from in_process import drain

from rqueue.encoding.payload import encode, new_ids
from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.cluster import ClusterClient
from rqueue.store.default import use
from rqueue.store.queue import Push, RedisQueue
from rqueue.store.scripts import Scripts
from rqueue.tasks.current import Runner, set_runner
from rqueue.worker.child import ChildWorker
from rqueue.worker.due_tasks import DueTasks
from rqueue.worker.options import WorkerOptions
from rqueue.worker.scoreboard import Scoreboard
from rqueue.worker.stop_reasons import StopReasons
from rqueue.worker.supervisor import Supervisor
from rqueue.worker.timeouts import TimeLimit

sys.path.insert(0, str(BENCH_DIR.parent / "tests"))  # the tests' local topologies
from topologies import LocalCluster

STAGING, BULK, OTHER = "staging", "bulk", "other"
SLOWLOG_US = 100
PROBE_EVERY = 0.02
DUE_HEADERS = (
    "tasks",
    "s until all ready",
    "moved/s",
    "slowest call ms",
    "slowest",
    "calls > 1 ms",
    "calls > 5 ms",
    "other p50 ms before",
    "other p99 ms before",
    "other p50 ms meanwhile",
    "other p99 ms meanwhile",
    "other max ms meanwhile",
)
QUEUE_HEADERS = (
    "queues",
    "tasks in",
    "tasks",
    "round trips/task",
    "child CPU us/task",
    "Redis CPU us/task",
    "parent tick ms",
    "parent tick round trips",
    "idle child round trips/s",
    "idle child CPU ms/s",
)


# -- due all at once --------------------------------------------------------------------


def fill_delayed(queue: RedisQueue, tasks: int) -> None:
    """Push ``tasks`` empty tasks to the staging queue, due a millisecond later."""
    for start in range(0, tasks, 10_000):
        payloads = empty_payloads(min(10_000, tasks - start))
        queue.push_many([Push(STAGING, 1, payloads)])


def empty_payloads(count: int) -> list[bytes]:
    """``count`` empty tasks, each with an id of its own (a set holds each once)."""
    job = bench_tasks.empty.make_job((), {})
    return [encode(replace(job, id=task_id)) for task_id in new_ids(count)]


def slowest(client: redis.Redis) -> tuple[list[float], str]:
    """Every SLOWLOG duration (ms) since the reset, and what the slowest call was."""
    names = {script.sha: f"{script.name}.lua" for script in Scripts().all()}
    entries = client.slowlog_get(1_000_000)
    if not entries:
        return [], "-"
    top = max(entries, key=lambda entry: entry["duration"])
    words = top["command"].split()
    what = names.get(words[1].decode(), words[1].decode()) if len(words) > 1 else words[0]
    return [entry["duration"] / 1000 for entry in entries], str(what)


class Probe(threading.Thread):
    """Dispatches ``record_start`` on ``other`` every PROBE_EVERY s until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()

    def run(self) -> None:
        task = bench_tasks.record_start.on_queue(OTHER)
        while not self.stop.wait(PROBE_EVERY):
            task.dispatch(time.time())


def latencies(client: redis.Redis, since: float, until: float) -> list[float]:
    """Dispatch-to-start (ms) of the probes dispatched in [since, until)."""
    found = []
    for line in client.lrange(bench_tasks.STARTS, 0, -1):
        started, due = (float(word) for word in line.split())
        if since <= due < until:
            found.append((started - due) * 1000)
    return found


def run_due(tasks: int = 1_000_000) -> list[tuple[object, ...]]:
    """One row of ``DUE_HEADERS``."""
    with RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        queue = RedisQueue(Config.resolve(redis_url=server.url))
        use(queue)
        client = queue.client
        fill_delayed(queue, tasks)
        client.config_set("slowlog-log-slower-than", SLOWLOG_US)
        client.config_set("slowlog-max-len", 1_000_000)
        worker = rqueue_work(server.url, 1, queue=f"{OTHER},{BULK}")
        probe = Probe()
        try:
            probe.start()
            while client.llen(bench_tasks.STARTS) < 10:  # the worker runs them: warmed up
                time.sleep(0.05)
            warmed = time.time()
            time.sleep(1.0)  # a second of probes with nothing due, for comparison
            staging, bulk = queue.keys(STAGING), queue.keys(BULK)
            client.slowlog_reset()
            released = time.time()
            client.rename(staging.delayed, bulk.delayed)
            client.rename(staging.pending_ids, bulk.pending_ids)
            client.rpush(bulk.timer, 1)
            while client.zcard(bulk.delayed):
                time.sleep(0.005)
            ready_at = time.time()
            durations, what = slowest(client)
            time.sleep(0.5)  # the probes dispatched just before the end start too
        finally:
            probe.stop.set()
            probe.join()
            stop_process(worker)
        before = latencies(client, warmed, released)
        during = latencies(client, released, ready_at)
    took = ready_at - released
    return [
        (
            tasks,
            took,
            tasks / took,
            max(durations, default=0.0),
            what,
            sum(1 for d in durations if d > 1),
            sum(1 for d in durations if d > 5),
            percentile(before, 0.5),
            percentile(before, 0.99),
            percentile(during, 0.5),
            percentile(during, 0.99),
            max(during, default=float("nan")),
        )
    ]


# -- many queues ------------------------------------------------------------------------


def child_of(url: str, queues: Sequence[str]) -> ChildWorker:
    """One worker child in this process serving ``queues`` (see ``hot_path.py``)."""
    options = WorkerOptions(queues=tuple(queues), prefetch=100)
    board = Scoreboard(1, options.held_limit)
    worker = ChildWorker(
        options, Config.resolve(redis_url=url), board.slot(0), 1, os.getppid(), "q"
    )
    use(worker.store)
    worker.time_limit = TimeLimit()
    set_runner(Runner(worker.store, options.timeout, options.kill_grace))
    return worker


def redis_cpu(client: redis.Redis) -> float:
    """Seconds of CPU Redis used so far: every master's, on a cluster."""
    nodes = client.slots.primaries() if isinstance(client, ClusterClient) else [client]
    infos = [node.info("cpu") for node in nodes]
    return sum(float(info["used_cpu_user"]) + float(info["used_cpu_sys"]) for info in infos)


@contextmanager
def redis_url(cluster: bool) -> Iterator[str]:
    """A fresh Redis (or a local 3-master cluster) for the queues part."""
    if cluster:
        with LocalCluster(3, replicas_per_master=0) as nodes:
            yield nodes.seed_url
    else:
        with RedisServer() as server:
            yield server.url


PARENT_TICK = 1.0
"""The longest wait of a parent's tick (``supervisor._TICK``)."""


def in_process_parent(url: str, queues: Sequence[str]) -> Supervisor:
    """A worker parent in this process with no children, ready for ``parent_tick``."""
    supervisor = Supervisor(WorkerOptions(queues=tuple(queues)), Config.resolve(redis_url=url))
    supervisor.queue = RedisQueue(supervisor.config)
    supervisor.due = DueTasks(supervisor.queue, supervisor.options.queues, supervisor.options.aging)
    supervisor.stop_reasons = StopReasons(supervisor.queue, supervisor.options, Scoreboard(1, 1))
    return supervisor


def parent_tick(supervisor: Supervisor) -> float:
    """The Redis work of one turn of ``Supervisor._tick`` but the scheduler's: migrate
    every queue's due tasks, check in to the registry. Returns the wait it computed."""
    wait = supervisor.due.migrate(PARENT_TICK)
    supervisor.stop_reasons.restart_requested()
    return wait


def timed_parent_tick(url: str, queues: Sequence[str]) -> tuple[float, int]:
    """Wall ms and round trips of one ``parent_tick`` (after one that loads the scripts)."""
    supervisor = in_process_parent(url, queues)
    parent_tick(supervisor)
    with Requests() as requests:
        began = time.perf_counter()
        parent_tick(supervisor)
        took = time.perf_counter() - began
    supervisor.queue.client.close()
    return took * 1000, requests.sent


def run_queues(
    counts: Sequence[int], tasks: int = 1000, cluster: bool = False
) -> list[tuple[object, ...]]:
    """Rows of ``QUEUE_HEADERS``: for each queue count, tasks in the first queue, in the
    last, and spread evenly over all of them."""
    rows: list[tuple[object, ...]] = []
    with redis_url(cluster) as url:
        os.environ["REDIS_URL"] = url
        for count in counts:
            queues = [f"tenant-{i}" for i in range(count)]
            worker = child_of(url, queues)
            client = worker.store.client
            tick_ms, tick_trips = timed_parent_tick(url, queues)
            client.flushall()
            for _ in range(4):  # idle a while: a polled wait's interval settles (cluster)
                worker._step()
            with Requests() as requests:  # all empty: looks for tasks, then blocks 1 s
                idle_cpu, idle_wall = time.process_time(), time.perf_counter()
                worker._step()
                idle_trips = requests.sent
                idle_cpu = (time.process_time() - idle_cpu) / (time.perf_counter() - idle_wall)
            for placement in ("first", "last", "spread"):
                client.flushall()
                spread = min(tasks, count)
                targets = {"first": [0], "last": [count - 1]}.get(
                    placement, [i * count // spread for i in range(spread)]
                )
                payloads = empty_payloads(tasks)
                step = len(targets)
                worker.store.push_many(
                    (queues[i], 0, payloads[n::step]) for n, i in enumerate(targets)
                )
                cpu_before = redis_cpu(client)
                with Requests() as requests:
                    cpu, _ = drain(worker, tasks)
                    sent = requests.sent
                rows.append(
                    (
                        count,
                        placement,
                        tasks,
                        sent / tasks,
                        cpu / tasks * 1e6,
                        (redis_cpu(client) - cpu_before) / tasks * 1e6,
                        tick_ms,
                        tick_trips,
                        idle_trips,
                        idle_cpu * 1000,
                    )
                )
            worker.store.client.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("due", "queues"))
    parser.add_argument("--tasks", type=int, default=None, help="due: 10^6; queues: 1000")
    parser.add_argument("--queues", default="10,100,1000,10000", help="queues: counts to try")
    parser.add_argument("--cluster", action="store_true", help="queues: on a 3-master cluster")
    args = parser.parse_args(argv)
    logging.getLogger("rqueue").setLevel(logging.WARNING)
    print(machine_summary())
    if args.part == "due":
        tasks = args.tasks or 1_000_000
        table(DUE_HEADERS, run_due(tasks), f"{tasks:,} delayed tasks due at once")
    else:
        counts = [int(n) for n in args.queues.split(",")]
        tasks = args.tasks or 1000
        title = f"One child serving many queues, {tasks:,} empty tasks, --prefetch 100"
        if args.cluster:
            title += ", 3-master Redis Cluster"
        table(QUEUE_HEADERS, run_queues(counts, tasks, args.cluster), title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
