"""The benchmarks that drive rqueue's internals in-process still run (#30).

Some benchmarks run a worker parent or child inside their own process, calling what
a real one calls (``benchmarks/support/in_process.py``, ``scale/scale_due.py``), or
wrap its internals by name (``wake_trace.py``'s ``sitecustomize``, ``packing.py``): a
refactor of those internals breaks them without any test noticing, until someone
wants a figure. ``scale_schedule_burst.py`` was found broken that way (a parent's tick
renamed), and ``wake_trace.py`` (the process title moved to ``worker/titles.py``). Each
is run here at its smallest, with the real interpreter and a server of its own: its
exit status and that it printed a table are checked, never its figures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

RUNS = {
    "schedule burst (in-process parent)": (
        "scale/scale_schedule_burst.py",
        "--due",
        "200",
        "--add",
        "500",
        "--runs",
        "1",
    ),
    "workflows (in-process child)": (
        "speed/workflows.py",
        "--tasks",
        "300",
        "--members",
        "300",
        "--rounds",
        "1",
    ),
    "hot path (in-process child)": ("speed/hot_path.py", "--tasks", "2000", "--rounds", "1"),
    "wake-up trace (marks the worker's steps by name)": ("speed/wake_trace.py", "--samples", "5"),
    "packing (records a dispatch's wire call)": ("speed/packing.py", "--number", "100"),
}


@pytest.mark.parametrize("command", RUNS.values(), ids=RUNS.keys())
def test_the_benchmark_runs_to_its_tables(command: tuple[str, ...]) -> None:
    ran = _ran(*command)
    rows = [line for line in ran.stdout.splitlines() if line.startswith("| ")]
    assert rows, ran.stdout[-2000:]


def test_per_task_measures_a_plain_task_and_a_batch_member() -> None:
    """``per_task.py`` runs the child's per-task entry alone (no table): one line per kind."""
    ran = _ran("speed/per_task.py", "--member", "--tasks", "200", "--rounds", "1")
    lines = [line for line in ran.stdout.splitlines() if "child CPU per task" in line]
    assert len(lines) == 2, ran.stdout[-2000:]
    assert "a plain task" in lines[0] and "a batch member" in lines[1]
    assert all("Python calls" in line for line in lines)


def _ran(script: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """The benchmark ``script`` run to its end with this interpreter, which must succeed."""
    ran = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    return ran
