"""What a scoreboard slot says, apart from how it is kept in shared memory.

A slot's state and an entry's state (written by the child that owns the slot,
:class:`rqueue.worker.scoreboard.Slot`), and the views the parent reads back
(:meth:`rqueue.worker.scoreboard.Scoreboard.read`): the supervisor to kill a child
that overruns, recovery to settle what a dead child held. Plain values, no memory:
``scoreboard.py`` owns the byte layout and the seqlock that keeps a read consistent.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple


class State(IntEnum):
    STARTING = 0
    WAITING = 1  # no task held; polling or blocked on an empty queue
    HOLDING = 2  # holds reserved tasks, none running (between tasks)
    RUNNING = 3  # entry ``current`` is running
    REPORTING = 4  # entry ``current - 1`` finished; hooks and listeners are running
    EMPTY = 5  # like WAITING, after finding every queue empty
    CONCURRENT = 6  # concurrent mode: each entry's own state says what became of it


class Entry(IntEnum):
    """An entry's own state; only a ``CONCURRENT`` slot's entries use it."""

    UNSTARTED = 0
    RUNNING = 1
    DONE = 2  # finished (its hooks may still run, under the entry's deadline)
    FREE = 3  # holds no task: its ack went, or it was given back


class Held(NamedTuple):
    """A reserved task as the scoreboard knows it: its id and its attempt count."""

    id: str
    attempts: int


class EntryView(NamedTuple):
    """A ``CONCURRENT`` slot's entry: its task, what became of it, its queue and when
    it must end (0: no kill deadline)."""

    held: Held
    state: Entry
    queue_index: int
    deadline: float


@dataclass(frozen=True)
class SlotView:
    state: State
    queue_index: int
    held: tuple[Held, ...]
    current: int
    deadline: float
    processed: int
    entries: tuple[EntryView, ...] = ()
    """Filled in for a ``CONCURRENT`` slot only."""

    def unfinished(self) -> int:
        """Tasks held and not finished yet (``--max-jobs`` counts them as taken)."""
        if self.state == State.CONCURRENT:
            return sum(1 for e in self.entries if e.state in (Entry.UNSTARTED, Entry.RUNNING))
        if self.state in (State.HOLDING, State.RUNNING, State.REPORTING):
            return len(self.held) - self.current
        return 0
