"""How many processes each of a pool's parents should run: one pure decision a step.

As Horizon's auto balancing: a queue's *work* is the tasks waiting or in hand times
their mean runtime (its time to clear with one process); the pool wants enough
processes to clear it within ``time_to_clear`` seconds, between ``min_processes`` and
``max_processes``. A queue whose oldest ready task has waited longer than that is
falling behind whatever the estimate says, and wants one more process than it has.
``balance = "auto"`` shares the wanted processes between the queues' parents by
their work, each keeping one; ``"simple"`` splits them evenly; ``"off"`` has one
parent. Each step moves a parent by at most ``balance_max_shift`` processes, and
never takes the pool below ``min_processes`` or above ``max_processes``.

Pure: the caller measures (``load.py``), decides here, then writes the targets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rqueue.worker.pools.config import Pool
from rqueue.worker.pools.plan import Parent, floor

DEFAULT_RUNTIME = 1.0
"""Seconds a task is taken to run while its queue has no runtime measured yet."""


@dataclass(frozen=True)
class QueueLoad:
    """A queue's state as measured for one step."""

    queue: str
    ready: int
    reserved: int
    oldest_wait: float | None
    """Seconds the oldest ready task has waited (None: none ready)."""
    runtime: float | None
    """Mean seconds an attempt runs (None: not measured yet)."""

    @property
    def work(self) -> float:
        """Seconds of work waiting or in hand, for one process."""
        runtime = DEFAULT_RUNTIME if self.runtime is None else self.runtime
        return (self.ready + self.reserved) * runtime

    def wanted(self, pool: Pool, current: int) -> int:
        """Processes this queue wants (the caller adds its parent's floor)."""
        wanted = math.ceil(self.work / pool.time_to_clear)
        if self.ready and self.oldest_wait is not None and self.oldest_wait > pool.time_to_clear:
            wanted = max(wanted, current + 1)  # falling behind, whatever the estimate
        return wanted


@dataclass(frozen=True)
class Decision:
    """One step of a pool: what each parent wanted, and the bounded move to it."""

    wanted: tuple[int, ...]
    targets: tuple[int, ...]
    loads: tuple[QueueLoad, ...]


def initial(pool: Pool, parents: Sequence[Parent]) -> list[int]:
    """The parents' counts at start: the pool's floor, split evenly."""
    return _shared(floor(pool, parents), [1] * len(parents), parents)


def decide(
    pool: Pool,
    parents: Sequence[Parent],
    current: Sequence[int],
    loads: Mapping[str, QueueLoad],
) -> Decision:
    """The next targets of ``parents`` (running ``current`` processes) under ``loads``."""
    by_parent = [
        sum(loads[q].wanted(pool, now) for q in p.queues)
        for p, now in zip(parents, current, strict=True)
    ]
    least = floor(pool, parents)
    asked = sum(max(p.least, want) for p, want in zip(parents, by_parent, strict=True))
    total = min(max(asked, least), pool.max_processes)
    if pool.balance == "auto":
        wanted = _shared(total, by_parent, parents)
    else:
        wanted = _shared(total, [1] * len(parents), parents)
    targets = _bounded(pool, parents, current, wanted, least)
    return Decision(tuple(wanted), targets, tuple(loads[q] for p in parents for q in p.queues))


def _shared(total: int, weights: Sequence[int], parents: Sequence[Parent]) -> list[int]:
    """``total`` processes shared by ``weights`` (all equal when none weighs anything),
    each parent getting its ``least`` and at most its ``most``: largest remainders."""
    shares = [p.least for p in parents]
    weights = list(weights) if any(weights) else [1] * len(parents)
    while sum(shares) < total:
        room = [i for i, p in enumerate(parents) if shares[i] < p.most]
        if not room:
            break
        # The parent furthest below its share of the total gets the next process.
        i = max(room, key=lambda i: (weights[i] * total / sum(weights) - shares[i], -i))
        shares[i] += 1
    return shares


def _bounded(
    pool: Pool,
    parents: Sequence[Parent],
    current: Sequence[int],
    wanted: Sequence[int],
    least: int,
) -> tuple[int, ...]:
    """Each parent moved towards what it wants by at most ``balance_max_shift``; shrinks
    held back so the pool stays at ``least`` or more, growths so it stays at most max."""
    shift = pool.balance_max_shift
    moved = [
        min(max(now + max(-shift, min(shift, want - now)), p.least), p.most)
        for p, now, want in zip(parents, current, wanted, strict=True)
    ]
    for i in sorted(range(len(moved)), key=lambda i: moved[i] - current[i]):
        while sum(moved) < least and moved[i] < current[i]:
            moved[i] += 1
    for i in sorted(range(len(moved)), key=lambda i: current[i] - moved[i]):
        while sum(moved) > pool.max_processes and moved[i] > current[i]:
            moved[i] -= 1
    return tuple(moved)
