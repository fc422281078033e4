"""Each pool's worker parents, and the ``rqueue work`` command line each runs.

``balance = "off"``: one parent takes the pool's queues in order, as ``rqueue work
a,b`` does. ``"simple"`` and ``"auto"``: a parent a queue, so that each queue's
processes can be counted and moved (Horizon's per-queue process pools); each keeps at
least one process, so no queue goes unserved while another is busy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rqueue.worker.pools.config import WORK_FLAGS, Pool


@dataclass(frozen=True)
class Parent:
    """One ``rqueue work`` parent of a pool: its queues and its range of children."""

    pool: Pool
    queues: tuple[str, ...]
    least: int
    most: int

    def argv(self, count: int, count_file: str) -> list[str]:
        """``rqueue work ...`` (after ``python -m rqueue``) starting ``count`` children,
        then following the count ``count_file`` holds."""
        return [
            "work",
            ",".join(self.queues),
            "--concurrency",
            str(count),
            "--max-concurrency",
            str(self.most),
            "--concurrency-file",
            count_file,
            *work_options(self.pool, self.queues),
        ]


def parents(pool: Pool) -> tuple[Parent, ...]:
    """The pool's parents: one (``off``), or one a queue."""
    if pool.balance == "off":
        return (Parent(pool, pool.queues, pool.min_processes, pool.max_processes),)
    count = len(pool.queues)
    most = (
        math.ceil(pool.max_processes / count)
        if pool.balance == "simple"
        else pool.max_processes - (count - 1)
    )
    return tuple(Parent(pool, (queue,), 1, most) for queue in pool.queues)


def floor(pool: Pool, planned: Sequence[Parent]) -> int:
    """The fewest processes the pool runs: ``min_processes``, and each parent's least."""
    return max(pool.min_processes, sum(p.least for p in planned))


def work_options(pool: Pool, queues: tuple[str, ...]) -> list[str]:
    """The pool's ``rqueue work`` options as flags. A ``rate`` naming queues keeps the
    queues of this parent only."""
    args: list[str] = []
    for key, value in pool.work.items():
        flag = "--" + key.replace("_", "-")
        if key == "app":
            args += [arg for module in value for arg in ("-A", module)]
        elif key == "events":
            args += [flag] if value else []
        elif key in WORK_FLAGS:
            args.append(flag if value else f"--no-{flag[2:]}")
        elif key == "rate" and "=" in value:
            kept = [item for item in value.split(",") if item.split("=")[0].strip() in queues]
            args += [flag, ",".join(kept)] if kept else []
        else:
            args += [flag, str(value)]
    return args


def describe(pool: Pool) -> list[str]:
    """The plan of one pool, as ``rqueue supervise --check`` prints it."""
    planned = parents(pool)
    lines = [
        f"pool {pool.name}: queues {', '.join(pool.queues)}; "
        f"{floor(pool, planned)} to {pool.max_processes} processes; balance {pool.balance}"
        f" (at most {pool.balance_max_shift} a step, every {pool.balance_cooldown:g} s; "
        f"time to clear {pool.time_to_clear:g} s)"
    ]
    for parent in planned:
        queues = ",".join(parent.queues)
        command = " ".join(["rqueue work", queues, *work_options(pool, parent.queues)])
        lines.append(f"  {parent.least} to {parent.most} processes: {command}")
    return lines
