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

After each run the ceiling is measured once more with the INCRs shared rather than split
in fixed halves (``bare_incr_spans(shared=True)``): on a busy machine one client of the
split ceiling often finishes its half long before the other, which then runs alone.

``--unpinned``: each tree's worker once more per round with ``--no-pin-cpus`` (by default
``rqueue work -c 2`` on 2 CPUs pins its children one to a CPU; a tree without the option
runs ``--pin-cpus`` instead, its default being free), and after the rounds the ceiling
beside the same ceiling with its clients pinned the same way (3 runs each, interleaved):
the ratios stay those to the unpinned ceiling, as the issue defines it.

``--work-us 0,5,10``: the ceiling again with that much Python work per INCR, after the
rounds: what a queue's per-task cost does to the same clients on this machine.

    python benchmarks/speed/cpu_light.py                            # 3 rounds
    python benchmarks/speed/cpu_light.py --tree /tmp/before --tree . --rounds 5
    python benchmarks/speed/cpu_light.py --rounds 1 --work-us 0,4,8,12,16
    python benchmarks/speed/cpu_light.py --unpinned --rounds 4
"""

from __future__ import annotations

import argparse
import math
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
Run = tuple[Path, tuple[str, ...]]
"""A checkout, and what its ``rqueue work`` is given beyond the harness' own options."""


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


def ceiling(
    url: str, tasks: int, processes: int, work: float = 0.0, shared: bool = False
) -> tuple[list[Span], Window]:
    watched: dict[str, list[int]] = {}
    redis_pid = [redis.Redis.from_url(url).info("server")["process_id"]]
    sampler = cpu_account.CpuSampler(watched)

    def watch(pids: list[int]) -> None:
        watched.update(clients=pids, redis=redis_pid)
        sampler.start()
        time.sleep(0.02)  # a sample before they go

    try:
        spans = bare_incr_spans(url, tasks, processes, work, on_ready=watch, shared=shared)
    finally:
        sampler.stop()
    return spans, sampler.window(min(s[0] for s in spans), max(s[1] for s in spans))


def rqueue_run(
    queue: RedisQueue, url: str, tree: Path, tasks: int, concurrency: int, *extra: str
) -> tuple[list[Span], Window]:
    client = queue.client
    queue.clear("default")
    client.delete(bench_tasks.COUNTER)
    for start in range(0, tasks, 1000):
        cpu_account.incr_marked.dispatch_many([()] * min(1000, tasks - start))
    with tempfile.TemporaryDirectory() as folder:
        env = {"PYTHONPATH": str(tree), "BENCH_MARKS": folder}
        worker = rqueue_work(url, concurrency, *extra, env=env)
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


def one_round(
    queue: RedisQueue, url: str, run: Run, tasks: int, processes: int, title: str
) -> tuple[float, float]:
    """The ceiling, the run's and the shared ceiling, printed: the run's rate as a
    fraction of the ceiling just before it, and of the shared one just after."""
    load = os.getloadavg()[0]
    bare_spans, bare = ceiling(url, tasks, processes)
    tree, extra = run
    spans, ours = rqueue_run(queue, url, tree, tasks, processes, *extra)
    shared_spans = ceiling(url, tasks, processes, shared=True)[0]
    before, after = rate(spans) / rate(bare_spans), rate(spans) / rate(shared_spans)
    table(
        ("process", "first INCR +ms", "last INCR -ms", "INCRs", "own rate /s"),
        spans_table("ceiling client", bare_spans) + spans_table("rqueue child", spans),
        f"{title}, {label(run)}: rqueue {rate(spans):,.0f}/s; ceiling just before "
        f"{rate(bare_spans):,.0f}/s (x {before:.2f}), shared just after "
        f"{rate(shared_spans):,.0f}/s (x {after:.2f}); load {load:.1f}; spans "
        f"{ours.span * 1000:.0f} / {bare.span * 1000:.0f} ms",
    )
    headers = ("where", "rqueue ms", "of CPUs x span", "µs/task", "ceiling ms", "of", "µs/op")
    table(headers, accounting(tasks, ours, bare))
    return before, after


def pinned_ceiling(url: str, tasks: int, processes: int) -> None:
    """The ceiling beside the same with its clients pinned one to a CPU, 3 runs each."""
    found: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(3):
        for pinned, rates in found.items():
            rates.append(rate(bare_incr_spans(url, tasks, processes, pinned=pinned)))
    print(
        f"the ceiling: {statistics.median(found[False]):,.0f} INCR/s; its clients pinned one "
        f"to a CPU: {statistics.median(found[True]):,.0f} INCR/s (medians of 3, interleaved)"
    )


def the_other_way(tree: Path) -> str:
    """``--no-pin-cpus``; ``--pin-cpus`` for a tree from before children were pinned by
    default (it has no ``--no-pin-cpus``)."""
    cli = (tree / "rqueue" / "cli" / "work.py").read_text()
    return "--no-pin-cpus" if "--no-pin-cpus" in cli else "--pin-cpus"


def label(run: Run) -> str:
    tree, extra = run
    return " ".join((str(tree), *extra))


def work_curve(url: str, tasks: int, processes: int, works: list[float]) -> None:
    """The ceiling with ``works`` µs of Python per INCR, 3 runs each, interleaved."""
    found: dict[float, list[float]] = {work: [] for work in works}
    for _ in range(3):
        for work, rates in found.items():
            rates.append(rate(ceiling(url, tasks, processes, work / 1e6)[0]))
    bare = statistics.median(found.get(0.0) or [math.nan])
    table(
        ("Python work per INCR, µs", "median /s", "x the ceiling with none"),
        [
            (f"{w:g}", statistics.median(r), f"{statistics.median(r) / bare:.2f}")
            for w, r in found.items()
        ],
        "The ceiling's clients with some Python work after each INCR, 3 runs each",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=2, help="workers' -c and the ceiling's")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append", help="a checkout (repeatable)")
    parser.add_argument("--work-us", default="", help="ceilings with Python work per INCR")
    parser.add_argument(
        "--unpinned", action="store_true", help="also with --no-pin-cpus (old trees: --pin-cpus)"
    )
    options = parser.parse_args()
    trees = [tree.resolve() for tree in options.tree or [Path(__file__).resolve().parents[2]]]
    runs: list[Run] = [(tree, ()) for tree in trees]
    if options.unpinned:
        runs += [(tree, (the_other_way(tree),)) for tree in trees]
    ratios: dict[Run, list[tuple[float, float]]] = {run: [] for run in runs}
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        print(machine_summary(queue.client), flush=True)
        for number in range(options.rounds):
            for run in runs if number % 2 == 0 else runs[::-1]:
                title = f"round {number + 1}"
                ratios[run].append(
                    one_round(queue, server.url, run, options.tasks, options.processes, title)
                )
        if options.unpinned:
            pinned_ceiling(server.url, options.tasks, options.processes)
        works = [float(w) for w in options.work_us.split(",") if w]
        if works:
            work_curve(server.url, options.tasks, options.processes, works)
    for run, found in ratios.items():
        before, after = ([pair[i] for pair in found] for i in (0, 1))
        print(
            f"{label(run)}: x bare-INCR ceiling just before "
            f"{', '.join(f'{r:.2f}' for r in before)}, "
            f"median {statistics.median(before):.2f}; x shared ceiling just after "
            f"{', '.join(f'{r:.2f}' for r in after)}, median {statistics.median(after):.2f}"
        )


if __name__ == "__main__":
    main()
