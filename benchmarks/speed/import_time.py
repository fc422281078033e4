"""What ``import rqueue`` costs: in all, and in rqueue's own modules alone.

Every producer pays this once per process, and ``rqueue --help`` pays it too. Each
sample is a fresh interpreter run with ``-X importtime``. Several source trees (say a
worktree of the previous release beside this checkout) are sampled in turn, so a
machine that drifts while the script runs affects them alike::

    python benchmarks/speed/import_time.py . ../rqueue-before --runs 40
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path


def sample(tree: Path) -> tuple[int, int, bool]:
    """One fresh ``import rqueue`` from ``tree``: total µs, rqueue's own µs, croniter loaded."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tree)}
    code = "import rqueue, sys; print('croniter' in sys.modules)"
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
        check=True,
    )
    total = own = 0
    for line in run.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|")
        module = name.strip()
        if module == "rqueue" or module.startswith("rqueue."):
            own += int(self_us)
        if module == "rqueue":
            total = int(cumulative_us)
    return total, own, run.stdout.strip() == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path, help="source trees holding rqueue/")
    parser.add_argument("--runs", type=int, default=30, help="fresh interpreters per tree")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.trees]
    samples: dict[Path, list[tuple[int, int, bool]]] = {tree: [] for tree in trees}
    for tree in trees:  # a first run writes the bytecode caches: not a sample
        sample(tree)
    for _ in range(args.runs):
        for tree in trees:
            samples[tree].append(sample(tree))
    print("| tree | import rqueue, median ms | rqueue's own modules, median ms | croniter |")
    print("|---|---|---|---|")
    for tree, runs in samples.items():
        total = statistics.median(t for t, _, _ in runs) / 1000
        own = statistics.median(o for _, o, _ in runs) / 1000
        croniter = "imported" if any(c for _, _, c in runs) else "not imported"
        print(f"| {tree} | {total:.1f} | {own:.1f} | {croniter} |")


if __name__ == "__main__":
    main()
