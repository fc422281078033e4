"""Where a run's CPUs went: each process's CPU and run-queue wait, and the machine's idle.

A rate beside its ceiling says how far a queue is from the machine; this says why. A
thread samples, every ``interval`` seconds, the CPU each watched process has used and
the time it spent runnable but waiting for a CPU (both from its threads'
``/proc/<pid>/task/*/schedstat``, in nanoseconds), and the whole machine's busy and idle
time (``/proc/stat``, in clock ticks); :meth:`CpuSampler.window` interpolates them to any
two moments, such as a run's first and last INCR. What the watched processes do not
account for of the machine's busy time is ``other``: this harness's other threads,
other programs sharing the machine.

CPU-light runs also need each worker's first and last INCR: ``incr_marked`` (the CPU-light
task, as ``bench_tasks.incr``) leaves them in a file per process under ``BENCH_MARKS``
(an mmap'd record rewritten per task: no Redis call, under a microsecond), read back
with :func:`read_marks`.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import bench_tasks

from rqueue import task

TICK = os.sysconf("SC_CLK_TCK")
_MARK = struct.Struct("ddq")
"""A process's first INCR, its latest, and how many it did (``time.perf_counter``:
CLOCK_MONOTONIC, one clock for every process of the machine)."""


def process_ns(pid: int) -> tuple[int, int]:
    """(CPU ns, run-queue wait ns) of a process so far, its threads summed; 0 once gone."""
    cpu = wait = 0
    for path in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            ran, waited, _ = path.read_text().split()
        except (OSError, ValueError):
            continue
        cpu, wait = cpu + int(ran), wait + int(waited)
    return cpu, wait


def tree_usage(pid: int) -> tuple[float, int]:
    """(CPU seconds, context switches) so far of a process and its children, their
    threads summed: what a thread's every wait for the GIL costs shows up as switches
    (each a futex wait and its wake), which no CPU profile of Python code names."""
    pids = [pid] + [int(p) for p in _read(f"/proc/{pid}/task/{pid}/children").split()]
    cpu, switches = 0, 0
    for each in pids:
        cpu += process_ns(each)[0]
        for path in Path(f"/proc/{each}/task").glob("*/status"):
            text = _read(str(path))
            switches += sum(
                int(line.split()[1]) for line in text.splitlines() if "ctxt_switches" in line
            )
    return cpu / 1e9, switches


def _read(path: str) -> str:
    """A /proc file's text, or nothing once its process or thread is gone."""
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine_ticks() -> tuple[int, int]:
    """(busy, idle) clock ticks of all CPUs so far; steal time counts as busy."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:9]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, idle


@dataclass
class Window:
    """CPU seconds per role and run-queue wait seconds per role over one window."""

    span: float
    cpu: dict[str, float]
    waited: dict[str, float]
    busy: float
    idle: float

    def rows(self, tasks: int, cpus: int) -> list[tuple[str, str, str, str]]:
        """(what, ms, share of cpus x span, µs per task) for each role, other, idle."""
        whole = cpus * self.span

        def row(name: str, seconds: float) -> tuple[str, str, str, str]:
            share = f"{seconds / whole:.1%}"
            return (name, f"{seconds * 1000:.0f}", share, f"{seconds / tasks * 1e6:.1f}")

        shown = [row(name, seconds) for name, seconds in self.cpu.items()]
        shown.append(row("other (busy, not the above)", self.busy - sum(self.cpu.values())))
        shown.append(row("idle", self.idle))
        shown += [row(f"{name}: runnable, waiting for a CPU", s) for name, s in self.waited.items()]
        return shown


@dataclass
class CpuSampler:
    """Samples ``roles`` (name -> pids) and the machine in a thread (see the module doc)."""

    roles: Mapping[str, Sequence[int]]
    interval: float = 0.01
    _samples: list[tuple[float, dict[str, tuple[int, int]], tuple[int, int]]] = field(
        default_factory=list
    )
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _seen: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Each pid's latest figures: a process that has exited keeps them."""

    def start(self) -> CpuSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()

    def __enter__(self) -> CpuSampler:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def _sample(self) -> None:
        roles = {}
        for name, pids in self.roles.items():
            for pid in pids:
                self._seen[pid] = max(self._seen.get(pid, (0, 0)), process_ns(pid))
            each = [self._seen[pid] for pid in pids]
            roles[name] = (sum(c for c, _ in each), sum(w for _, w in each))
        roles["harness"] = process_ns(os.getpid())
        self._samples.append((time.perf_counter(), roles, machine_ticks()))

    def _at(self, moment: float) -> tuple[dict[str, tuple[float, float]], tuple[float, float]]:
        samples = self._samples
        later = next((i for i, s in enumerate(samples) if s[0] >= moment), len(samples) - 1)
        before, after = samples[max(0, later - 1)], samples[later]
        gap = after[0] - before[0]
        part = min(1.0, max(0.0, (moment - before[0]) / gap)) if gap > 0 else 0.0

        def between(a: float, b: float) -> float:
            return a + part * (b - a)

        roles = {
            name: (between(c, after[1][name][0]), between(w, after[1][name][1]))
            for name, (c, w) in before[1].items()
        }
        machine = (between(before[2][0], after[2][0]), between(before[2][1], after[2][1]))
        return roles, machine

    def window(self, first: float, last: float) -> Window:
        """What happened between two ``time.perf_counter`` moments while it sampled."""
        (start, machine_start), (end, machine_end) = self._at(first), self._at(last)
        return Window(
            last - first,
            {name: (end[name][0] - c) / 1e9 for name, (c, _) in start.items()},
            {name: (end[name][1] - w) / 1e9 for name, (_, w) in start.items() if name != "harness"},
            (machine_end[0] - machine_start[0]) / TICK,
            (machine_end[1] - machine_start[1]) / TICK,
        )


# -- the CPU-light task, marked ---------------------------------------------------------

_marks: list[mmap.mmap] = []
_first_and_count = [0.0, 0]


@task
def incr_marked() -> None:
    """``bench_tasks.incr``, then this process's first and latest INCR (module doc)."""
    bench_tasks.client().incr(bench_tasks.COUNTER)
    now = time.perf_counter()
    if not _marks:
        descriptor = os.open(
            Path(os.environ["BENCH_MARKS"]) / str(os.getpid()), os.O_RDWR | os.O_CREAT
        )
        os.ftruncate(descriptor, _MARK.size)
        _marks.append(mmap.mmap(descriptor, _MARK.size))
        os.close(descriptor)
        _first_and_count[0] = now
    _first_and_count[1] += 1
    _MARK.pack_into(_marks[0], 0, _first_and_count[0], now, _first_and_count[1])


def read_marks(folder: Path) -> list[tuple[float, float, int]]:
    """Each process's (first INCR, last INCR, INCRs) left by ``incr_marked`` in ``folder``."""
    return [_MARK.unpack(path.read_bytes()[: _MARK.size]) for path in sorted(folder.iterdir())]
