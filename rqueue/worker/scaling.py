"""A worker parent's child count, changed while it runs (``rqueue supervise`` scales it).

The count comes from a file (``--concurrency-file``): one whole number, read each tick
of the parent's loop. A file, not signals such as Celery's SIGTTIN/SIGTTOU: a signal
says "one more", and two sent at once arrive as one; a number says how many, so
reading it again is harmless, and a parent that restarts (``rqueue restart`` re-execs
it) reads the count it must keep at once.

Growing forks children into free scoreboard slots. Shrinking stops children warmly,
as ``rqueue work`` stops them on SIGTERM: a child finishes what it runs and gives back
what it reserved ahead, so no task is interrupted or lost. Idle children go first,
the highest numbered among equals, so a shrink after a burst stops children that run
nothing. A child that died is replaced (:func:`respawn_delay` says when) unless the
count went down meanwhile.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from rqueue.worker.scoreboard import SlotView, State

log = logging.getLogger("rqueue.worker")

_IDLE = (State.STARTING, State.WAITING, State.EMPTY)
_RESPAWN_BACKOFF = 1.0


class TargetFile:
    """The child count a file asks for, within ``1..capacity``."""

    def __init__(self, path: str, capacity: int) -> None:
        self.path = path
        self.capacity = capacity
        self._seen: tuple[int, int] | None = None
        self._target: int | None = None

    def target(self) -> int | None:
        """The count asked for; None while the file is missing or unreadable (the
        parent keeps the count it has). Read again only once the file changed."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return self._target
        stamp = (stat.st_mtime_ns, stat.st_ino)
        if stamp == self._seen:
            return self._target
        self._seen = stamp
        try:
            with open(self.path, encoding="ascii") as file:
                asked = int(file.read().strip())
        except (OSError, ValueError):
            log.warning("%s does not hold a whole number of children; ignored", self.path)
            return self._target
        if not 1 <= asked <= self.capacity:
            log.warning(
                "%s asks for %d children: kept within 1..%d", self.path, asked, self.capacity
            )
        self._target = min(max(asked, 1), self.capacity)
        return self._target


def write_target(path: str, count: int) -> None:
    """Write ``count`` for a parent reading ``path``: to a file beside it, then renamed,
    so the parent never reads a half-written number."""
    partial = f"{path}.partial"
    with open(partial, "w", encoding="ascii") as file:
        file.write(f"{count}\n")
    os.replace(partial, path)


@dataclass(frozen=True)
class Resize:
    """What a parent does to reach its target, by child number."""

    forgo: tuple[int, ...] = ()
    """Children waiting to be replaced (they died) that are not to be any more."""
    stop: tuple[int, ...] = ()
    """Children to stop warmly."""
    spawn: tuple[int, ...] = ()
    """Free slots to fork a child into."""


def resize(
    target: int,
    kept: Mapping[int, SlotView | None],
    pending: Collection[int],
    taken: Collection[int],
    capacity: int,
) -> Resize:
    """How to go from the children ``kept`` (number -> its slot's view; those being
    stopped left out) and those ``pending`` a respawn, to ``target``. Forgo respawns
    first, then stop idle children, the highest numbered among equals; grow into the
    slots no child holds (``taken``: stopping ones hold theirs until they exit)."""
    excess = len(kept) + len(pending) - target
    if excess > 0:
        forgo = tuple(sorted(pending, reverse=True)[:excess])
        idle = {n for n, view in kept.items() if view is not None and view.state in _IDLE}
        ranked = sorted(kept, key=lambda n: (n in idle, n), reverse=True)
        return Resize(forgo=forgo, stop=tuple(ranked[: excess - len(forgo)]))
    held = set(taken) | set(pending)
    free = [n for n in range(1, capacity + 1) if n not in held]
    return Resize(spawn=tuple(free[:-excess]) if excess < 0 else ())


def respawn_delay(lived: float, view: SlotView | None) -> float:
    """Seconds before a child that ended after ``lived`` seconds is replaced: none, unless
    it died young without finishing a task (a crash loop: importing the app fails, Redis
    refuses it), which waits :data:`_RESPAWN_BACKOFF` rather than forking as fast as it
    can. A child that finished tasks and left (recycled over ``--memory``) made progress,
    however young: its place is filled at once."""
    if lived < _RESPAWN_BACKOFF and (view is None or view.processed == 0):
        return _RESPAWN_BACKOFF
    return 0.0
