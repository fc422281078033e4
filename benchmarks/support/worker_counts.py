"""What a running ``rqueue work`` has cost so far, read from outside: each process's CPU,
and what it sent to Redis, split between its parent and its children.

The sending side is counted inside the worker by ``wire_counts/sitecustomize.py`` (see
its docstring), which a benchmark puts on the worker's PYTHONPATH with :attr:`Counters.env`.
Figures are added into one flat mapping, named ``<figure>.parent`` or
``<figure>.children``, so that two readings subtract key by key.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, MutableMapping
from pathlib import Path
from typing import Protocol

import psutil

WIRE_COUNTS = Path(__file__).resolve().parent / "wire_counts"
"""The folder of the counting ``sitecustomize``."""
FIELDS = ("requests", "writes", "bytes", "main_requests", "send_ns", "read_ns")
"""Its first counters, in file order, as it writes them; one per script follows."""


class Script(Protocol):
    """A script a worker may call (``rqueue.store.scripts.LuaScript``): counted by SHA."""

    @property
    def name(self) -> str: ...

    @property
    def sha(self) -> str: ...


class Counters:
    """The worker's own counts: where they go (a folder, one file per process), the
    environment that turns them on, and reading them back."""

    def __init__(self, folder: Path, scripts: Iterable[Script]) -> None:
        self.folder = folder
        listed = list(scripts)
        self.names = (*FIELDS, *(f"script.{script.name}" for script in listed))
        self.env = {
            "PYTHONPATH": str(WIRE_COUNTS),
            "RQUEUE_BENCH_WIRE_DIR": str(folder),
            "RQUEUE_BENCH_WIRE_SHAS": ",".join(script.sha for script in listed),
        }

    def read(self, worker: int, figures: MutableMapping[str, float]) -> None:
        """Add every process's counts so far (those of a child that exited too)."""
        layout = f"{len(self.names)}Q"
        for path in self.folder.iterdir():
            values = struct.unpack(layout, path.read_bytes()[: struct.calcsize(layout)])
            role = _role(int(path.name), worker)
            for name, value in zip(self.names, values, strict=True):
                figures[f"{name}.{role}"] = figures.get(f"{name}.{role}", 0.0) + value


def worker_cpu(worker: int, figures: MutableMapping[str, float]) -> None:
    """Add the CPU seconds of the worker's live processes: ``cpu.parent``, ``cpu.children``."""
    root = psutil.Process(worker)
    for process in (root, *root.children(recursive=True)):
        key = f"cpu.{_role(process.pid, worker)}"
        figures[key] = figures.get(key, 0.0) + cpu_seconds(process)


def cpu_seconds(process: psutil.Process) -> float:
    """The CPU a process has used, to the nanosecond where Linux says (the sum of its
    threads' ``schedstat``), else psutil's: its ``cpu_times`` come in 10 ms ticks, and a
    parent using 0.3 us per task of 20,000 reads as 0 or 10 ms in a window."""
    try:
        threads = list(Path(f"/proc/{process.pid}/task").glob("*/schedstat"))
        if threads:
            return sum(int(path.read_text().split()[0]) for path in threads) / 1e9
        times = process.cpu_times()
    except (OSError, psutil.NoSuchProcess):
        return 0.0
    return float(times.user + times.system)


def _role(pid: int, worker: int) -> str:
    return "parent" if pid == worker else "children"
