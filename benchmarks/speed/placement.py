"""Where the kernel runs two CPU-light processes and Redis: how often both last ran on
one CPU, for a worker's two children (pinned by default, and ``--no-pin-cpus``) and for
the ceiling's two plain redis-py clients.

Each round runs the bare-INCR ceiling (``support/ceilings.py``), then ``--tasks`` INCR
tasks pre-loaded and run by ``rqueue work default -c 2``, as it starts by default and
with ``--no-pin-cpus``. Meanwhile a thread reads, every 2 ms, the CPU each process last
ran on (``/proc/<pid>/stat``) and counts the samples in which the two shared one;
for the children ``/proc/<pid>/sched`` around the run gives each one's CPU, migrations
and context switches per task (the ceiling's clients have exited when it ends). On a
2-CPU machine the kernel, left to itself, often keeps both busy processes on one CPU
and Redis on the other (worker/cpus.py says why that costs a worker more than the
plain clients).

    python benchmarks/speed/placement.py               # 3 rounds, 20,000 tasks
    python benchmarks/speed/placement.py --rounds 1 --tasks 2000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # the shared code

import bench_tasks
import psutil
from ceilings import bare_incr_spans, spans_rate
from common import machine_summary, rqueue_work, table, wait_until

from rqueue.server import RedisServer
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.queue import RedisQueue

SCHED = ("se.sum_exec_runtime", "se.nr_migrations", "nr_switches", "nr_involuntary_switches")
"""Counters of ``/proc/<pid>/sched``: CPU ms, moves between CPUs, switches, preemptions."""


def last_cpu(pid: int) -> int:
    """The CPU ``pid`` last ran on (field 39 of its stat, after the name's parenthesis)."""
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[36])


def sched(pid: int) -> dict[str, float]:
    found = {}
    with open(f"/proc/{pid}/sched") as lines:
        for line in lines:
            name, _, value = line.partition(":")
            if name.strip() in SCHED:
                found[name.strip()] = float(value)
    return found


class Sampler:
    """Samples, in a thread, whether a pair of processes last ran on the same CPU, and
    (``counters``) their ``sched`` counters from start to stop."""

    def __init__(self, pids: list[int], counters: bool = True) -> None:
        self.pids, self.together, self.samples = pids, 0, 0
        self.before = [sched(pid) for pid in pids] if counters else []
        self.after: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            try:
                first, second = (last_cpu(pid) for pid in self.pids)
            except OSError:  # one has exited: the run is over
                return
            self.samples += 1
            self.together += first == second

    def stop(self) -> None:
        self.after = [sched(pid) for pid in self.pids] if self.before else []
        self._stop.set()
        self._thread.join()

    def row(self, label: str, tasks: int) -> tuple[object, ...]:
        together = f"{self.together / max(self.samples, 1):.0%} of {self.samples}"
        if not self.after:
            return (label, together, "-", "-", "-", "-")
        per = [
            {name: (after[name] - before[name]) / (tasks / len(self.pids)) for name in SCHED}
            for before, after in zip(self.before, self.after, strict=True)
        ]
        mean = {name: statistics.mean(p[name] for p in per) for name in SCHED}
        return (
            label,
            together,
            f"{mean['se.sum_exec_runtime'] * 1000:.1f}",
            f"{mean['se.nr_migrations']:.4f}",
            f"{mean['nr_switches']:.2f}",
            f"{mean['nr_involuntary_switches']:.2f}",
        )


def ceiling(url: str, tasks: int) -> tuple[float, Sampler]:
    """The bare-INCR ceiling, sampled from the moment its clients are ready."""
    sampler: list[Sampler] = []
    spans = bare_incr_spans(
        url, tasks, 2, on_ready=lambda pids: sampler.append(Sampler(pids, counters=False))
    )
    sampler[0].stop()
    return spans_rate(tasks, spans), sampler[0]


def worker(
    queue: RedisQueue, url: str, tasks: int, extra: tuple[str, ...]
) -> tuple[float, Sampler]:
    """``tasks`` INCR tasks run by ``rqueue work -c 2``, sampled from its first INCR to
    its last (rate counted over the same span, by polling the counter)."""

    def done() -> int:
        return int(queue.client.get(bench_tasks.COUNTER) or 0)

    queue.client.delete(bench_tasks.COUNTER)
    for start in range(0, tasks, 1000):
        bench_tasks.incr.dispatch_many([()] * min(1000, tasks - start))
    process = rqueue_work(url, 2, *extra)
    try:
        parent = psutil.Process(process.pid)
        wait_until(lambda: len(parent.children()) == 2, 30)
        pids = [child.pid for child in parent.children()]
        first = wait_until(lambda: done() > 0, 30, 0.001)
        sampler = Sampler(pids)
        last = wait_until(lambda: done() >= tasks, 120, 0.002)
        sampler.stop()
    finally:
        process.terminate()
        process.wait()
    return tasks / (last - first), sampler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    rows = []
    with RedisServer() as server:
        queue = RedisQueue(Config(redis_url=server.url))
        use(queue)
        print(machine_summary(queue.client), flush=True)
        for number in range(1, options.rounds + 1):
            rate, sampler = ceiling(server.url, options.tasks)
            rows.append(sampler.row(f"{number}: ceiling, {rate:,.0f} INCR/s", options.tasks))
            for extra in ((), ("--no-pin-cpus",)):
                rate, sampler = worker(queue, server.url, options.tasks, extra)
                name = " ".join(("rqueue work -c 2", *extra))
                rows.append(sampler.row(f"{number}: {name}, {rate:,.0f} tasks/s", options.tasks))
            print(f"round {number} done", flush=True)
    table(
        (
            "round: run",
            "samples with both on one CPU",
            "CPU µs/task",
            "migrations/task",
            "switches/task",
            "preempted/task",
        ),
        rows,
        "Two CPU-light processes: how often both last ran on one CPU (sampled every 2 ms), "
        "and per task (per INCR for the ceiling), each process's mean",
    )


if __name__ == "__main__":
    main()
