"""The parts of the schedule scripts' calls, typed: what a save, a read of the timeline
and a firing send and get back (``schedule_store.py`` makes the calls; the scheduler
and its plan build and keep these between them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class Saving(NamedTuple):
    """One schedule's part of a save_schedules.lua call."""

    queue: str
    name: str
    read: bytes
    """The definition bytes the caller read (``b""``: it must not exist yet)."""
    definition: bytes
    """The new definition, unsigned: signed here like every definition written."""
    next_ms: int | None
    """Its next fire time; None takes it off the timeline (paused, finished)."""


class Firing(NamedTuple):
    """One schedule's part of a fire_schedules.lua call: what a worker read, and what
    it writes if still so."""

    queue: str
    name: bytes
    read_ms: float
    """The fire time this worker read from the timeline (the trigger it fires from; a
    hostile one, ``-inf``, only to shelve it)."""
    read: bytes
    """The definition bytes this worker read."""
    next_ms: int | None
    """The next fire time, None once the schedule is finished."""
    definition: bytes
    """The new definition (its last run and finished flag)."""
    payloads: Sequence[bytes]
    """One task per trigger to enqueue, unsigned: signed here like every push."""
    fire_by: int | None = None
    """For a firing planned ahead of its trigger, the last Redis time (ms) it holds for;
    None: it was computed once due, and holds as long as the schedule is unchanged."""


class Read(NamedTuple):
    """What one earliest_schedules.lua call reads of a queue's timeline."""

    queue: str
    limit: int
    low: str = "-inf"
    """The fire times to read from and to, as ZRANGEBYSCORE takes them (``(`` excludes)."""
    high: str = "+inf"
    skip: int = 0
    """How many entries of that range to pass over first."""
    ahead_ms: int = 0
    """How far ahead of Redis's clock definitions are read (0: only the due ones')."""


FIRE_CHUNK = 200
"""Most schedules one fire_schedules.lua call fires: a bounded call."""


class Prepared(NamedTuple):
    """Firings signed and packed for fire_schedules.lua, ready to send: what a tick
    planned ahead of a trigger leaves nothing but the round trip for the instant."""

    firings: Sequence[Firing]
    packed: Sequence[bytes]
    """Per firing, its part of fire_schedules.lua's argument: the parts of many
    prepared at different times join into one call per queue when sent together."""


class Sent(NamedTuple):
    """What became of prepared firings."""

    won: list[bool]
    """Per firing, whether this worker fired it."""
    early: list[int]
    """Those not fired as their trigger is still ahead by Redis's clock: they hold."""
    wait: float
    """Seconds until all of those are due, by the clock of their node."""
