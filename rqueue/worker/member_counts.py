"""Batch members' counts, owed until the call that carries their acknowledgements.

A batch member is counted (batch_member.lua) before it is acknowledged, so that the
callbacks its count makes due are pushed before it leaves its queue: a worker dying in
between runs it again, and the second count changes nothing but finds the same
callbacks due, pushed once (push_once.lua). A success's acknowledgement waits for the
child's next reserve call (reservations.py), so its count waits with it: the members
finished since the last call are counted one call per batch, just before the call
that carries their acks, instead of one call per member as each finishes.

Why not inside the reserve call itself, as a kept result is written: a batch's keys
share the batch's hash slot (its members may be in any queues), not its members'
queue's, so on Redis Cluster no queue script may touch them, and a pipeline may not
mix the two either. One call per batch per reserve call keeps count-before-ack on a
single Redis and a cluster alike.

A child that dies owes counts: its parent counts the members the child had finished
before acknowledging them (:func:`count_finished`, recovery.py). A member whose
batch's callback gets the results sends its return value with its count; one whose
count died with the child took its value along, so the parent gives it back to run
again instead (its count, exact, takes the value of the run that is counted).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import NamedTuple

from rqueue.encoding.payload import CHAIN, decode
from rqueue.errors import InvalidPayload, describe
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import refusal
from rqueue.workflows.batch_results import RESULTS, over_limit
from rqueue.workflows.batches import BATCH, member_index
from rqueue.workflows.effects import Member
from rqueue.workflows.nesting import count_members

log = logging.getLogger("rqueue.worker")


Owed = tuple[str, bytes, Member]
"""A member that succeeded and whose count has not been sent (its ack waits for it):
its queue, its payload, and its :class:`Member` (its batch, index and task id, and its
packed return value for a callback of its batch that gets the results). A plain tuple,
made once per member: a named one's constructor is a Python call."""


class Uncounted(NamedTuple):
    """A finished member whose batch Redis refused to count (a key of the wrong type),
    or whose value it could not keep (``RQUEUE_MAX_BATCH_RESULTS_BYTES``: counted as
    failed instead)."""

    queue: str
    payload: bytes
    reason: str
    kind: str = "ResponseError"


class OwedCounts:
    """The counts one worker child owes, by batch id."""

    def __init__(self) -> None:
        self._owed: dict[str, list[Owed]] = {}

    def __bool__(self) -> bool:
        return bool(self._owed)

    def owe(self, queue: str, payload: bytes, member: Member) -> None:
        """Count this member as succeeded before its ack goes. Only successes wait: a
        failure's or a skip's count goes at once, with the call that settles it (a
        parent counts a dead child's finished tasks as successes)."""
        self._owed.setdefault(member.batch_id, []).append((queue, payload, member))

    def settle(self, store: RedisQueue) -> list[Uncounted]:
        """Count every member owed, one call per batch, pushing the callbacks due; the
        members Redis refused to count, whose acks must not go (they fail instead).
        An outage raises, and what is left stays owed: counting is idempotent."""
        refused: list[Uncounted] = []
        for batch_id in list(self._owed):
            owed = self._owed[batch_id]
            members = [(m.member_index, "s", m.task_id, m.value) for _, _, m in owed]
            try:
                counted = count_members(store, batch_id, members)
            except Exception as exc:
                if not refusal(exc):
                    raise
                reason = describe(exc)[1]
                refused.extend(Uncounted(queue, payload, reason) for queue, payload, _ in owed)
            else:
                if "x" in counted:  # a value over the bound
                    refused.extend(_over_bound(store, batch_id, owed, counted))
            del self._owed[batch_id]
        return refused


def _over_bound(
    store: RedisQueue, batch_id: str, owed: Sequence[Owed], counted: str
) -> list[Uncounted]:
    """The members whose values the batch could not keep (counted ``x``: as failed
    instead), to fail for good."""
    limit = store.config.max_batch_results_bytes
    over = []
    for (queue, payload, member), said in zip(owed, counted, strict=False):
        if said == "x":
            size = len(member.value or b"")
            reason = str(over_limit(batch_id, member.member_index, size, limit))
            over.append(Uncounted(queue, payload, reason, "ResultTooLarge"))
    return over


def count_finished(store: RedisQueue, queue: str, payloads: Sequence[bytes]) -> list[bytes]:
    """Count the members among tasks a dead child finished, before its parent acks them;
    those to run again instead, their values lost with the child (see above).

    A task the child finished and still reserved is a success whose ack (and count)
    had not gone yet: failures, skips and releases leave the reserved set at once.
    Counted as succeeded; one counted before is not counted again. A batch that
    refuses the count (its state written by hand) is logged, and its members acked
    all the same: they ran, and the batch cannot take them."""
    owed, again = OwedCounts(), []
    for payload in payloads:
        try:
            job = decode(payload)
            if BATCH not in job.meta or job.meta.get(CHAIN):  # a chain counts at its end
                continue
            if job.meta.get(RESULTS) is True:
                again.append(payload)
            else:
                member = Member(job.meta[BATCH], member_index(job), "s", job.id)
                owed.owe(queue, payload, member)
        except InvalidPayload:
            continue  # not a member this worker could have counted either
    for uncounted in owed.settle(store):
        log.error("%s: a batch refused to count a finished member: %s", queue, uncounted.reason)
    return again
