"""What a worker child's reserve calls bring back (reservations.py): a batch of tasks,
a call whose reply is still to read, and an acknowledgement Redis refused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from rqueue.store.queue import Kept, Reservation


@dataclass(frozen=True)
class Reserved:
    """A batch of reserved tasks of one queue (not a workflow batch: ``rqueue.workflows``);
    ``sent_at`` is when the reserve call left (monotonic)."""

    queue_index: int
    reservation: Reservation
    sent_at: float
    unconfirmed: bool = False
    """Reserved behind a wait (``Reservations.wait_then_reserve``, ``reserve_behind``):
    each task's reservation lasts
    the margin alone until ``Reservations.confirm`` renews it."""


@dataclass(frozen=True)
class ReadAhead:
    """A reserve call sent before its batch is needed, its reply still to read: the
    acks it carries, given back if it fails (``Reservations.settle``)."""

    queue_index: int
    sent_at: float
    reply: Callable[[], Reservation]
    acks: list[bytes]
    kept: list[Kept]
    unconfirmed: bool = False


class Refused(NamedTuple):
    """A success whose acknowledgement (with its result record), or its batch's count
    of it, Redis refused."""

    queue: str
    payload: bytes
    reason: str
    """What Redis refused and why, for its failure record."""
    kind: str = "ResponseError"
