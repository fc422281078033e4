"""A child's finished tasks whose acknowledgements wait for a call to carry them.

A success is not acknowledged on its own: its ack rides on the child's next reserve
call for its queue (``reservations.py``), or on ``ack.lua`` when none comes in time.
Until then it is held here, by queue, with its result record if it keeps one and
its count if it is a batch's member (counted just before the call that carries its
ack: ``member_counts.py``). The earliest of their reservations' ends says when they
must go without waiting for a reserve call (``due_by``).
"""

from __future__ import annotations

from rqueue.store.queue import Kept
from rqueue.worker.member_counts import OwedCounts
from rqueue.workflows.effects import Member


class PendingAcks:
    """Successes held until a call acknowledges them, by queue."""

    def __init__(self) -> None:
        self.plain: dict[str, list[bytes]] = {}
        self.kept: dict[str, list[Kept]] = {}
        """Successes whose result is kept: acked the same way, with their records."""
        self.counts = OwedCounts()
        """Batch members' counts, sent before the call that carries their acks."""
        self._deadline = float("inf")

    def acknowledge(
        self,
        queue: str,
        payload: bytes,
        expires_at: float,
        kept: Kept | None = None,
        member: Member | None = None,
    ) -> None:
        """Hold a success for the next call to ``queue``: ``kept`` is its result record
        if it keeps one (written by that same call), ``member`` its count (with its
        value to keep for the batch) if it is a batch's member."""
        if member is not None:
            self.counts.owe(queue, payload, member)
        if kept is None:
            self.plain.setdefault(queue, []).append(payload)
        else:
            self.kept.setdefault(queue, []).append(kept)
        self._deadline = min(self._deadline, expires_at)

    def __bool__(self) -> bool:
        return bool(self.plain) or bool(self.kept)

    def queues(self) -> set[str]:
        """The queues with acknowledgements held."""
        return {*self.plain, *self.kept}

    def due_by(self, moment: float) -> bool:
        """True if a held task's reservation could run out by ``moment``: send them first."""
        return moment >= self._deadline

    def of(self, queue: str) -> tuple[list[bytes], list[Kept]]:
        """What is held for ``queue``, left held (until :meth:`take`)."""
        return self.plain.get(queue, []), self.kept.get(queue, [])

    def take(self, queue: str) -> tuple[list[bytes], list[Kept]]:
        """What is held for ``queue``, no longer held: a call carries it now."""
        taken = self.plain.pop(queue, []), self.kept.pop(queue, [])
        self._reset_deadline()
        return taken

    def put_back(self, queue: str, plain: list[bytes], kept: list[Kept]) -> None:
        """Hold again acks a call may not have delivered, first and due at once."""
        self.plain.setdefault(queue, [])[:0] = plain
        self.kept.setdefault(queue, [])[:0] = kept
        self._deadline = 0.0

    def drop(self, queue: str, payload: bytes) -> None:
        """Let go of one held success: it is failed instead."""
        plain = [p for p in self.plain.pop(queue, []) if p != payload]
        kept = [k for k in self.kept.pop(queue, []) if k.payload != payload]
        if plain:
            self.plain[queue] = plain
        if kept:
            self.kept[queue] = kept
        self._reset_deadline()

    def finished(self, queue: str) -> set[bytes]:
        """The reserved payloads of ``queue``'s held successes."""
        return {*self.plain.get(queue, ()), *(k.payload for k in self.kept.get(queue, ()))}

    def _reset_deadline(self) -> None:
        if not self.plain and not self.kept:
            self._deadline = float("inf")
