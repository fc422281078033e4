"""Throughput: dispatch and processing rates of rqueue, beside what Redis and Python allow.

Starts its own redis-server, then for N tasks reports:

- the raw script ceiling of one Python client (see redis_limit.py);
- dispatch one call at a time (``task.dispatch()``) beside a bare one-LPUSH-per-call
  loop, and bulk dispatch (``task.dispatch_many``);
- processing with the real ``rqueue work`` CLI at each concurrency, for empty tasks
  and for tasks doing one Redis INCR, beside bare processes doing only that INCR;
- Redis commands per task (``INFO commandstats`` deltas) and peak RSS per process.

    python benchmarks/speed/throughput.py               # 50,000 tasks
    python benchmarks/speed/throughput.py --tasks 5000  # a quick check
    python benchmarks/speed/throughput.py --skip-dispatch --worker-args "--prefetch 100"
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
import redis_limit
from ceilings import bare_incr_rate
from common import (
    MemorySampler,
    command_calls,
    command_delta,
    machine_summary,
    rqueue_work,
    table,
)

from rqueue.encoding.payload import encode
from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import Task

BULK = 1000
"""Calls per ``dispatch_many`` in the bulk measurement (and when filling the queue)."""

WATCHED = {"llen": 1, "zcard": 1, "info": 0}
"""Commands the watcher itself sends per poll (INFO is dropped entirely)."""


@dataclass
class Run:
    kind: str
    concurrency: int
    tasks: int
    from_start: float
    steady: float
    exit_after: float
    commands: dict[str, int]
    memory: str


def fill(task: Task[[], None], count: int) -> None:
    for start in range(0, count, BULK):
        task.dispatch_many([()] * min(BULK, count - start))


def measure_dispatch(queue: RedisQueue, count: int) -> list[tuple[str, float, str]]:
    client = queue.client
    task = bench_tasks.empty
    payload = encode(task.make_job((), {}))
    rows: list[tuple[str, float, str]] = []

    client.delete("bench:lpush")
    started = time.perf_counter()
    for _ in range(count):
        client.lpush("bench:lpush", payload)
    bare = count / (time.perf_counter() - started)
    client.delete("bench:lpush")
    rows.append(("bare LPUSH loop (redis-py, one call per task)", bare, "1.00"))

    queue.clear("default")
    task.dispatch()  # first dispatch also records the queue name; not timed
    started = time.perf_counter()
    for _ in range(count):
        task.dispatch()
    single = count / (time.perf_counter() - started)
    rows.append(("task.dispatch(), one call per task", single, f"{single / bare:.2f}"))

    queue.clear("default")
    started = time.perf_counter()
    fill(task, count)
    bulk = count / (time.perf_counter() - started)
    rows.append((f"task.dispatch_many(), {BULK} calls per round trip", bulk, f"{bulk / bare:.2f}"))
    queue.clear("default")
    return rows


def measure_processing(
    queue: RedisQueue,
    url: str,
    task: Task[[], None],
    kind: str,
    count: int,
    concurrency: int,
    worker_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    stderr: IO[bytes] | None = None,
) -> Run:
    client = queue.client
    keys = queue.keys("default")
    queue.clear("default")
    client.delete(bench_tasks.COUNTER)
    fill(task, count)
    before = command_calls(client)
    polls = 0
    started = time.perf_counter()
    worker = rqueue_work(
        url, concurrency, "--stop-when-empty", *worker_args, env=env, stderr=stderr
    )
    sampler = MemorySampler(worker.pid).start()
    first = done = 0.0
    deadline = started + 600
    while time.perf_counter() < deadline:
        pipe = client.pipeline(transaction=False)
        pipe.llen(keys.ready)
        pipe.zcard(keys.reserved)
        ready, reserved = pipe.execute()
        polls += 1
        now = time.perf_counter()
        if not first and ready < count:
            first = now
        if ready == 0 and reserved == 0:
            done = now
            break
        if worker.poll() is not None:
            break
        time.sleep(0.005)
    after = command_calls(client)
    try:
        worker.wait(60)
    except subprocess.TimeoutExpired:
        stop_process(worker)
    exited = time.perf_counter()
    sampler.stop()
    commands = command_delta(before, after)
    for name, per_poll in WATCHED.items():
        commands[name] = commands.get(name, 0) - per_poll * polls
    commands = {k: v for k, v in commands.items() if v > 0}
    if not done:
        print(f"  ! {kind} at concurrency {concurrency} did not finish (exit {worker.returncode})")
        done = exited
    return Run(
        kind,
        concurrency,
        count,
        from_start=count / (done - started),
        steady=count / (done - (first or started)),
        exit_after=exited - done,
        commands=commands,
        memory=sampler.summary(),
    )


def round_trips(run: Run) -> float:
    """Estimated queue round trips per task: acks ride with the next reserve."""
    c = run.commands
    # Every EVALSHA and BLPOP is one round trip; acks ride inside the next reserve call.
    return (c.get("evalsha", 0) + c.get("blpop", 0)) / run.tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50_000, help="tasks per measurement")
    parser.add_argument("--concurrency", default="1,2,4", help="comma-separated (default 1,2,4)")
    parser.add_argument("--skip-dispatch", action="store_true")
    parser.add_argument(
        "--worker-args", default="", help='extra `rqueue work` options, e.g. "--prefetch 100"'
    )
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    with RedisServer() as server:
        url = server.url
        queue = RedisQueue(Config(redis_url=url))
        use(queue)
        client = redis.Redis.from_url(url)
        print(machine_summary(client))
        print(f"{args.tasks:,} tasks per measurement", flush=True)

        limit = redis_limit.measure(url, min(args.tasks, 20_000))
        table(("operation", "calls/s", "tasks/s"), limit, "Raw ceiling, single Python client")
        rates = {label: tasks_per_s for label, _, tasks_per_s in limit}
        reserve_one = rates["EVALSHA reserve.lua, 1 task per call"]

        if not args.skip_dispatch:
            dispatch = measure_dispatch(queue, args.tasks)
            table(("dispatch", "tasks/s", "x bare LPUSH"), dispatch, "Dispatch")

        runs: list[Run] = []
        bare: dict[int, float] = {}
        for kind, task in (("empty", bench_tasks.empty), ("INCR", bench_tasks.incr)):
            for concurrency in levels:
                run = measure_processing(
                    queue,
                    url,
                    task,
                    kind,
                    args.tasks,
                    concurrency,
                    tuple(shlex.split(args.worker_args)),
                )
                runs.append(run)
                print(
                    f"  {kind} c={concurrency}: {run.from_start:,.0f}/s from start, "
                    f"{run.steady:,.0f}/s steady",
                    flush=True,
                )
        for concurrency in levels:
            client.delete(bench_tasks.COUNTER)
            bare[concurrency] = bare_incr_rate(url, args.tasks, concurrency)

        reserve_batch = rates[f"EVALSHA reserve.lua, {redis_limit.BATCH} tasks per call"]
        rows = []
        for run in runs:
            if run.kind == "INCR":
                ratios = ("-", "-", f"{run.steady / bare[run.concurrency]:.2f}")
            else:
                ratios = (
                    f"{run.steady / reserve_one:.2f}",
                    f"{run.steady / reserve_batch:.2f}",
                    "-",
                )
            rows.append(
                (
                    run.kind,
                    run.concurrency,
                    run.from_start,
                    run.steady,
                    *ratios,
                    f"{run.exit_after:.2f}",
                )
            )
        table(
            (
                "task",
                "c",
                "tasks/s from worker start",
                "tasks/s steady",
                "x reserve.lua 1/call",
                f"x reserve.lua {redis_limit.BATCH}/call",
                "x bare INCR",
                "exit s after done",
            ),
            rows,
            "Processing with `rqueue work --stop-when-empty` (steady: from the first task "
            "taken to the last acknowledged)",
        )
        table(
            ("processes", "bare INCR/s"),
            [(c, bare[c]) for c in levels],
            "Bare Python processes doing only the INCR (the ceiling for INCR tasks)",
        )

        shown = ("evalsha", "zrem", "lpop", "zadd", "srem", "blpop", "incrby")
        table(
            ("task", "c", "round trips/task", *(f"{n}/task" for n in shown), "other/task"),
            [
                (
                    run.kind,
                    run.concurrency,
                    f"{round_trips(run):.3f}",
                    *(f"{run.commands.get(n, 0) / run.tasks:.3f}" for n in shown),
                    f"{sum(v for k, v in run.commands.items() if k not in shown) / run.tasks:.3f}",
                )
                for run in runs
            ],
            "Redis commands per task (INFO commandstats deltas, commands inside scripts counted "
            "too: zrem = acks (inside reserve.lua, or ack.lua before going idle), lpop = "
            "reserve calls that got tasks, zadd = reservations)",
        )
        table(
            ("task", "c", "peak RSS"),
            [(r.kind, r.concurrency, r.memory) for r in runs],
            "Peak RSS (sampled every 0.1 s)",
        )


if __name__ == "__main__":
    main()
