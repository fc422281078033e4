"""How long a thread-mode task's own steps take, beside plain threads doing the same.

Each task sleeps 20 ms, then INCRs (compare.py's io workload), and times both in its
thread: how much longer than 20 ms its sleep took, and its INCR's round trip. On a
thread, most of each is the wait to take the GIL back once the call returns, so the
figures show what the worker's loop and its task threads cost each other. Measured in
``rqueue work -c N --threads T`` (``bench_tasks.timed_wait_then_incr``) and in ``N``
plain processes of ``T`` threads each running the same function back to back, no queue
(what compare.py's thread-mode rate is up against), alternated ``--rounds`` times.
Beside them, each run's CPU and context switches per task, its processes' threads
summed (the worker's parent and children from the first INCR to the last): a wait for
the GIL that the holder does not end soon is a futex wait, a switch, and a wake; and
its tasks per second (rqueue's from the first INCR to the last, the plain threads' from
their start to the last one's end).

    python benchmarks/speed/thread_waits.py
    python benchmarks/speed/thread_waits.py --tasks 20000 --threads 50
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import msgpack
import redis
from common import let_go_at_once, machine_summary, rqueue_work, table, wait_until
from cpu_account import tree_usage
from in_process import fill

from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

TIMEOUT = 300.0


def _plain_threads(count: int, threads: int, ready: Any, go: Any, done: Any) -> None:
    """One no-queue process: ``threads`` threads share ``count`` calls, back to back; it
    puts the CPU seconds and context switches its threads used for them."""
    bench_tasks.client().ping()
    left, lock = [count], threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if not left[0]:
                    return
                left[0] -= 1
            bench_tasks.wait_then_incr_timed()

    ready.release()
    go.wait()
    start = _own_usage()
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    end = _own_usage()
    done.put((end[0] - start[0], end[1] - start[1]))


def _own_usage() -> tuple[float, int]:
    """(CPU seconds, context switches) of this process so far, every thread's summed."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_nvcsw + usage.ru_nivcsw


def _reports(client: redis.Redis) -> list[tuple[float, float]]:
    """Every pair reported (a process's last few hundred, short of a report, are not),
    read once the processes that report them have ended."""
    raw: list[bytes] = client.lrange(bench_tasks.WAITS, 0, -1)  # type: ignore[assignment]
    client.delete(bench_tasks.WAITS, bench_tasks.COUNTER)
    return [(pair[0], pair[1]) for batch in raw for pair in msgpack.unpackb(batch)]


Run = tuple[list[tuple[float, float]], float, float, float]
"""A run's reported (sleep overshoot, INCR) pairs, its processes' CPU microseconds and
context switches per task, and its tasks per second."""


def _rqueue(url: str, client: redis.Redis, args: argparse.Namespace) -> Run:
    """The worker's parent and children counted from the first INCR to the last."""
    fill(lambda count: bench_tasks.timed_wait_then_incr.dispatch_many([()] * count), args.tasks)
    worker = rqueue_work(
        url, args.processes, "--threads", str(args.threads), "--log-level", "WARNING"
    )

    def done() -> int:
        return int(client.get(bench_tasks.COUNTER) or 0)

    try:
        wait_until(lambda: done() > 0, TIMEOUT, 0.001)
        first, start, began = done(), tree_usage(worker.pid), time.perf_counter()
        wait_until(lambda: done() >= args.tasks, TIMEOUT, 0.001)
        ended, end, tasks = time.perf_counter(), tree_usage(worker.pid), max(1, done() - first)
    finally:
        stop_process(worker)
    cpu, switches = (end[0] - start[0]) / tasks * 1e6, (end[1] - start[1]) / tasks
    return _reports(client), cpu, switches, tasks / (ended - began)


def _plain(client: redis.Redis, args: argparse.Namespace) -> Run:
    share = args.tasks // args.processes
    began, used = let_go_at_once(_plain_threads, [(share, args.threads)] * args.processes, TIMEOUT)
    tasks = share * args.processes
    rate = tasks / (time.perf_counter() - began)  # to the last one's end
    cpu, switches = sum(u[0] for u in used), sum(u[1] for u in used)
    return _reports(client), cpu / tasks * 1e6, switches / tasks, rate


def _row(name: str, run: Run) -> tuple[Any, ...]:
    pairs, cpu, switches, rate = run
    overshoots, incrs = sorted(p[0] for p in pairs), sorted(p[1] for p in pairs)

    def at(values: list[float], share: float) -> float:
        return values[min(len(values) - 1, int(len(values) * share))] * 1000

    return (
        name,
        len(pairs),
        *(at(overshoots, q) for q in (0.5, 0.9, 0.99)),
        *(at(incrs, q) for q in (0.5, 0.9, 0.99)),
        cpu,
        switches,
        rate,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=100, help="per process")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for name in ("tasks", "threads", "processes", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    least = bench_tasks.REPORT_EVERY * args.processes
    if args.tasks < least:  # each process reports its timings that many at a time
        parser.error(f"--tasks must be at least {least} with --processes {args.processes}")
    rows = []
    with RedisServer() as server:
        os.environ["REDIS_URL"] = server.url
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        client = queue.client
        print(machine_summary(client))
        for number in range(1, args.rounds + 1):
            rows.append(
                _row(
                    f"rqueue --threads {args.threads}, round {number}",
                    _rqueue(server.url, client, args),
                )
            )
            rows.append(_row(f"plain threads, round {number}", _plain(client, args)))
    table(
        (
            "run",
            "tasks timed",
            "sleep over 20 ms p50 ms",
            "p90",
            "p99",
            "INCR p50 ms",
            "p90",
            "p99",
            "CPU us/task",
            "context switches/task",
            "tasks/s",
        ),
        rows,
        f"{args.processes} processes x {args.threads} threads, each task: sleep 20 ms, then INCR",
    )


if __name__ == "__main__":
    main()
