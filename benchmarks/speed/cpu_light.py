"""CPU-light (#30) in the issue's shape, and where the two CPUs of each run went.

Each round, for each checkout in ``--tree`` (alternated, in one sitting): the bare-INCR
ceiling (``--processes`` plain redis-py processes, ``support/ceilings.py``), then
``--tasks`` INCR tasks pre-loaded and ``rqueue work default -c N --log-level WARNING``
started on them, its rate counted from the first task's INCR to the last. The tasks
record their INCR times themselves (``cpu_account.incr_marked``): no poller runs during
the span, as none runs beside the ceiling. Per round it prints both rates and their
ratio, each process's first and last INCR (start skew, tail), and where ``cpus x span``
went, rqueue beside the ceiling: each process's CPU, the time it was runnable but
waiting for a CPU, the machine's other work and its idle time (``support/cpu_account.py``).

``--work-us 0,5,10``: the ceiling again with that much Python work per INCR, after the
rounds: what a queue's per-task cost does to the same clients on this machine.

    python benchmarks/speed/cpu_light.py                            # 3 rounds
    python benchmarks/speed/cpu_light.py --tree /tmp/before --tree . --rounds 5
    python benchmarks/speed/cpu_light.py --rounds 1 --work-us 0,4,8,12,16
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import cpu_account
import psutil
import redis
from ceilings import bare_incr_spans
from common import machine_summary, rqueue_work, table, wait_until

from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

Span = tuple[float, float, int]
Window = cpu_account.Window


def spans_table(name: str, spans: list[Span]) -> list[tuple[str, str, str, str, str]]:
    """Each process's first INCR after the run's first, its last before the run's last."""
    first, last = min(s[0] for s in spans), max(s[1] for s in spans)
    return [
        (
            f"{name} {number}",
            f"{(start - first) * 1000:.1f}",
            f"{(last - end) * 1000:.1f}",
            f"{count:,}",
            f"{count / (end - start):,.0f}",
        )
        for number, (start, end, count) in enumerate(sorted(spans), 1)
    ]


def ceiling(url: str, tasks: int, processes: int, work: float = 0.0) -> tuple[list[Span], Window]:
    watched: dict[str, list[int]] = {}
    redis_pid = [redis.Redis.from_url(url).info("server")["process_id"]]
    sampler = cpu_account.CpuSampler(watched)

    def watch(pids: list[int]) -> None:
        watched.update(clients=pids, redis=redis_pid)
        sampler.start()
        time.sleep(0.02)  # a sample before they go

    try:
        spans = bare_incr_spans(url, tasks, processes, work, on_ready=watch)
    finally:
        sampler.stop()
    return spans, sampler.window(min(s[0] for s in spans), max(s[1] for s in spans))


def rqueue_run(
    queue: RedisQueue, url: str, tree: Path, tasks: int, concurrency: int
) -> tuple[list[Span], Window]:
    client = queue.client
    queue.clear("default")
    client.delete(bench_tasks.COUNTER)
    for start in range(0, tasks, 1000):
        cpu_account.incr_marked.dispatch_many([()] * min(1000, tasks - start))
    with tempfile.TemporaryDirectory() as folder:
        env = {"PYTHONPATH": str(tree), "BENCH_MARKS": folder}
        worker = rqueue_work(url, concurrency, env=env)
        try:
            root = psutil.Process(worker.pid)
            wait_until(lambda: len(root.children()) >= concurrency, 30, 0.001)
            children = [child.pid for child in root.children()]
            redis_pid = [client.info("server")["process_id"]]
            roles = {"worker parent": [worker.pid], "worker children": children, "redis": redis_pid}
            with cpu_account.CpuSampler(roles) as sampler:
                # Not a poll during the span: one look a quarter second, to know it ended.
                wait_until(lambda: int(client.get(bench_tasks.COUNTER) or 0) >= tasks, 600, 0.25)
        finally:
            worker.terminate()
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        spans = cpu_account.read_marks(Path(folder))
    return spans, sampler.window(min(s[0] for s in spans), max(s[1] for s in spans))


def rate(spans: list[Span]) -> float:
    return sum(s[2] for s in spans) / (max(s[1] for s in spans) - min(s[0] for s in spans))


def accounting(tasks: int, ours: Window, bare: Window) -> list[tuple[str, ...]]:
    """rqueue's rows beside the ceiling's, by what they are."""
    cpus = os.cpu_count() or 1
    bare_rows = {
        row[0].replace("clients", "worker children"): row for row in bare.rows(tasks, cpus)
    }
    rows: list[tuple[str, ...]] = []
    for row in ours.rows(tasks, cpus):
        other = bare_rows.get(row[0], ("", "-", "-", "-"))
        rows.append((row[0], *row[1:], *other[1:]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=2, help="workers' -c and the ceiling's")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append", help="a checkout (repeatable)")
    parser.add_argument("--work-us", default="", help="ceilings with Python work per INCR")
    options = parser.parse_args()
    trees = [tree.resolve() for tree in options.tree or [Path(__file__).resolve().parents[2]]]
    ratios: dict[Path, list[float]] = {tree: [] for tree in trees}
    tasks, processes = options.tasks, options.processes
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        print(machine_summary(queue.client), flush=True)
        for number in range(options.rounds):
            for tree in trees if number % 2 == 0 else trees[::-1]:
                load = os.getloadavg()[0]
                bare_spans, bare = ceiling(server.url, tasks, processes)
                spans, ours = rqueue_run(queue, server.url, tree, tasks, processes)
                ratios[tree].append(rate(spans) / rate(bare_spans))
                table(
                    ("process", "first INCR +ms", "last INCR -ms", "INCRs", "own rate /s"),
                    spans_table("ceiling client", bare_spans) + spans_table("rqueue child", spans),
                    f"round {number + 1}, {tree}: rqueue {rate(spans):,.0f}/s, ceiling "
                    f"{rate(bare_spans):,.0f}/s just before: x {ratios[tree][-1]:.2f} "
                    f"(load {load:.1f}); spans {ours.span * 1000:.0f} / {bare.span * 1000:.0f} ms",
                )
                table(
                    (
                        "where",
                        "rqueue ms",
                        "of 2 CPUs x span",
                        "µs/task",
                        "ceiling ms",
                        "of",
                        "µs/op",
                    ),
                    accounting(tasks, ours, bare),
                )
        curve: dict[float, list[float]] = {float(w): [] for w in options.work_us.split(",") if w}
        for _ in range(3 if curve else 0):
            for work, found in curve.items():
                found.append(rate(ceiling(server.url, tasks, processes, work / 1e6)[0]))
        if curve:
            bare_rate = statistics.median(curve.get(0.0) or [0.0]) or float("nan")
            table(
                ("Python work per INCR, µs", "median /s", "x the ceiling with none"),
                [
                    (f"{work:g}", statistics.median(v), f"{statistics.median(v) / bare_rate:.2f}")
                    for work, v in curve.items()
                ],
                "The ceiling's clients with some Python work after each INCR, 3 runs each",
            )
    for tree, found in ratios.items():
        shown = ", ".join(f"{r:.2f}" for r in found)
        print(f"{tree}: x bare-INCR ceiling {shown}; median {statistics.median(found):.2f}")


if __name__ == "__main__":
    main()
