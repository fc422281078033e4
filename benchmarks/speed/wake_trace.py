"""Where one wake-up's time goes: the steps from a dispatch to the task's start.

With ``rqueue work`` idle, dispatch a task, wait until it reports its start, pause so
the child is idle again, repeat (as latency.py does, a plain task and its ``async def``
twin taking turns). This process and every process of the worker mark each step on
the monotonic clock, with the CPU time of the thread taking it
(``support/wake_trace/sitecustomize.py``: commands sent, replies read, the child's
claim, reserve call, scoreboard, admission, start). Prints, per mode, the median of
each step over the samples, in µs: the dispatching side's up to its push's reply, then
the worker's from the wake-up (its wait's reply read) to the task's first line.

The worker's first step, from the dispatch to its wait's reply read, spans processes
and includes reading that reply; a step from one thread to another (a wake-up handed
on) has no CPU time either. A step whose wall time is far above its
CPU time waited: for Redis, or for a processor
(on 2 CPUs, the worker, Redis and this process take turns). Each mark costs about a
microsecond, so the steps read a little slower than latency.py's untraced run.

    python benchmarks/speed/wake_trace.py --samples 200
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import redis
from common import SUPPORT_DIR, machine_summary, rqueue_work, table

from rqueue.server import RedisServer, stop_process
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

TRACING = SUPPORT_DIR / "wake_trace"
Mark = tuple[int, int, str, int, int]
"""When (ns), the thread's CPU time then (ns), the label, the process, the thread."""


def tracer(directory: str) -> object:
    """The tracing module, installed in this process too (it marks the dispatch)."""
    os.environ["RQUEUE_BENCH_TRACE_DIR"] = directory
    spec = importlib.util.spec_from_file_location("wake_trace_marks", TRACING / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.WRITE_AT_WAITS = False  # type: ignore[attr-defined]  # no file write mid-run here
    return module


def read_marks(directory: str) -> list[Mark]:
    marks = []
    for path in Path(directory).iterdir():
        for line in path.read_text().splitlines():
            at, cpu, thread, label = line.split(" ", 3)
            marks.append((int(at), int(cpu), label, int(path.name), int(thread)))
    return sorted(marks)


def samples(marks: list[Mark], me: int) -> dict[str, list[list[Mark]]]:
    """Each sample's marks, by mode: from this process's dispatch to the task's start."""
    found: dict[str, list[list[Mark]]] = defaultdict(list)
    mode, window = "", None
    for mark in marks:
        label, pid = mark[2], mark[3]
        if pid == me and label.startswith("dispatch "):
            mode, window = label.split(" ", 1)[1], [mark]
        elif window is not None:
            window.append(mark)
            if label == "task started":
                found[mode].append(window)
                window = None
    return found


def steps(windows: list[list[Mark]], me: int) -> list[tuple[str, float, float | str]]:
    """The median wall and CPU µs of each step seen in nine samples in ten, in the order
    they come: this process's up to its push's reply, then the worker's from the
    dispatch to its wake-up (its wait's reply read) and on to the task's start."""
    timed: dict[str, list[tuple[int, int | None]]] = defaultdict(list)
    offsets: dict[str, list[int]] = defaultdict(list)
    for window in windows:
        start = window[0]
        theirs = [m for m in window if m[3] != me]
        woken = next(i for i, m in enumerate(theirs) if m[2] == "read reply <")
        sides = (
            ("dispatching", [m for m in window if m[3] == me]),
            ("worker", [start, *theirs[woken:]]),
        )
        for side, marks in sides:
            seen: Counter[str] = Counter()
            for before, after in itertools.pairwise(marks):
                seen[after[2]] += 1
                name = f"{side}: {before[2]} -> {after[2]}"
                if seen[after[2]] > 1:
                    name += f" ({seen[after[2]]})"
                cpu = after[1] - before[1] if after[4] == before[4] else None  # one thread
                timed[name].append((after[0] - before[0], cpu))
                offsets[name].append(after[0] - start[0])
    rows: list[tuple[str, float, float | str]] = []
    for name in sorted(timed, key=lambda step: statistics.median(offsets[step])):
        values = timed[name]
        if len(values) < 0.9 * len(windows):
            continue
        wall = statistics.median(w for w, _ in values) / 1000
        cpus = [c for _, c in values if c is not None]
        rows.append((name, wall, statistics.median(cpus) / 1000 if cpus else ""))
    whole = [window[-1][0] - window[0][0] for window in windows]
    rows.append(("whole: dispatch -> task started", statistics.median(whole) / 1000, ""))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200, help="wake-ups per mode")
    parser.add_argument("--modes", default="process,async", help="process, async or both")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="rqueue-wake-trace-")
    marks = tracer(directory)
    tasks = {"process": bench_tasks.traced_start, "async": bench_tasks.traced_start_async}
    chosen = [(mode, tasks[mode]) for mode in args.modes.split(",")]
    me = os.getpid()
    with RedisServer() as server:
        use(RedisQueue(Config(redis_url=server.url)))
        client = redis.Redis.from_url(server.url)
        print(machine_summary(client))
        env = {"PYTHONPATH": str(TRACING), "RQUEUE_BENCH_TRACE_DIR": directory}
        worker = rqueue_work(server.url, 1, "--slots", "100", env=env)
        try:
            for _, task in chosen:  # warm up: the child forked and connected, its loop made
                task.dispatch()
                bench_tasks.wait_start(client, timeout=30)
            time.sleep(0.5)
            for _ in range(args.samples):
                for mode, task in chosen:
                    time.sleep(bench_tasks.IDLE_PAUSE)
                    marks.mark(f"dispatch {mode}")  # type: ignore[attr-defined]
                    task.dispatch()
                    marks.mark("dispatched")  # type: ignore[attr-defined]
                    bench_tasks.wait_start(client)
            time.sleep(0.2)  # the child writes its marks as it waits again
        finally:
            stop_process(worker)
    marks.write()  # type: ignore[attr-defined]
    for mode, windows in samples(read_marks(directory), me).items():
        table(
            ("step", "wall µs", "CPU µs"),
            steps(windows, me),
            f"One wake-up, {mode} mode: medians of {len(windows)} samples",
        )


if __name__ == "__main__":
    main()
