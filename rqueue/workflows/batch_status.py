"""A batch's counts and state, as readers see them: ``Batch.status()``, ``rqueue
batches``, the dashboard, and a callback's ``Batch.counted``.

Plain records built from what the store reads (:class:`~rqueue.store.batch_store.BatchState`);
building and dispatching batches is rqueue/workflows/batches.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from rqueue.store.batch_store import BatchState


class BatchCounts(NamedTuple):
    """A batch's counts at one moment: what a callback's batch was counted at when the
    member that made it due was counted (``Batch.counted``)."""

    total: int
    succeeded: int
    failed: int
    skipped: int

    @property
    def processed(self) -> int:
        return self.succeeded + self.failed

    @property
    def pending(self) -> int:
        return max(0, self.total - self.processed - self.skipped)

    @property
    def progress(self) -> float:
        """Percent of the members processed then, 0 to 100 (as ``BatchStatus.progress``)."""
        return 100.0 if not self.total else 100.0 * self.processed / self.total


@dataclass(frozen=True)
class BatchStatus:
    """A batch's counts and times, as ``Batch.status()`` reads them.

    A batch whose state in Redis does not parse (written by hand: ``total=abc``, an
    infinite time, a key of another type) has ``unreadable`` set to the reason, every
    count 0 and ``state`` ``"unreadable"``: readers show it as such and go on.
    """

    id: str
    name: str
    total: int
    pending: int
    processed: int
    succeeded: int
    failed: int
    skipped: int
    failed_ids: tuple[str, ...]
    cancelled: bool
    finished: bool
    created_at: float
    finished_at: float | None
    cancelled_at: float | None
    queues: tuple[str, ...]
    unreadable: str | None = None
    """Why the batch's state cannot be read; None for a batch that reads well."""
    parent: tuple[str, int] | None = None
    """If it is nested in a batch (a member, or a step of a member's chain): that
    batch's id and the member's index."""
    after: str | None = None
    """If it is a chain's step: the id of the task or batch before it."""
    nested: tuple[tuple[int, str], ...] = ()
    """The batches nested in it, (member index, batch id), by index: with ``parent``,
    the tree of a workflow (``rqueue batches show``, the dashboard)."""

    @property
    def progress(self) -> float:
        """Percent of the members processed (succeeded or failed), 0 to 100."""
        return 100.0 if not self.total else 100.0 * self.processed / self.total

    @property
    def state(self) -> str:
        """In words, as ``rqueue batches`` and the dashboard show it."""
        if self.unreadable is not None:
            return "unreadable"
        if self.cancelled:
            return "cancelled, finished" if self.finished else "cancelled"
        return "finished" if self.finished else "in progress"


def status_of(state: BatchState) -> BatchStatus:
    """A batch's state as read from Redis, as ``Batch.status()`` gives it."""
    processed = state.succeeded + state.failed
    return BatchStatus(
        id=state.id,
        name=state.name,
        total=state.total,
        pending=max(0, state.total - processed - state.skipped),
        processed=processed,
        succeeded=state.succeeded,
        failed=state.failed,
        skipped=state.skipped,
        failed_ids=state.failed_ids,
        cancelled=state.cancelled_at is not None,
        finished=state.finished_at is not None,
        created_at=state.created_at,
        finished_at=state.finished_at,
        cancelled_at=state.cancelled_at,
        queues=state.queues,
        parent=None if state.place is None else state.place.parent,
        after=None if state.place is None else state.place.after or None,
        nested=state.nested,
    )


def unreadable_status(batch_id: str, reason: str) -> BatchStatus:
    """What ``status()`` says of a batch whose state does not parse."""
    return BatchStatus(
        id=batch_id,
        name="",
        total=0,
        pending=0,
        processed=0,
        succeeded=0,
        failed=0,
        skipped=0,
        failed_ids=(),
        cancelled=False,
        finished=False,
        created_at=0.0,
        finished_at=None,
        cancelled_at=None,
        queues=(),
        unreadable=reason,
    )
