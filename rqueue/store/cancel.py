"""Cancel a task by its id: one that has not started without scanning its queue, one
that runs by a request its worker delivers.

push.lua records each pushed task's id in the queue's ``pending-ids`` set and
reserve.lua removes it, so "is it still pending?" is one O(1) set operation.
cancel.lua moves a pending id to the ``cancelled`` set; the payload itself stays in
the ready list or the delayed zset (removing it from a list would be a scan) and
reserve.lua drops it, unrun, when it reaches the front. Until then it is counted
out of the queue's sizes (``QueueSize.counted_out``): a cancelled timer is no work for
``--stop-when-drained`` to wait for. Only a task that is not
pending costs more: the queue's reserved set (the tasks in flight, a handful) is
read to say whether it is running.

A running task's cancel is a request (``CANCELLING``): cancel.lua records it in the
queue's ``cancelling`` hash, the worker's parent reads the requests of its queues
while its children run tasks (:func:`requests`), signals the child that runs one,
and the task's outcome is settled as cancelled (:func:`settle`), or, if it finished
first, stays what it was and the request is pruned (:func:`prune`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from rqueue.store import calls
from rqueue.store.header import raw_id
from rqueue.store.queue import RedisQueue
from rqueue.store.scripts import execute


class CancelOutcome(enum.Enum):
    CANCELLED = "cancelled"
    ALREADY_CANCELLED = "already cancelled"
    CANCELLING = "cancelling"
    NOT_PENDING = "not pending"

    def __bool__(self) -> bool:
        return self is CancelOutcome.CANCELLED

    @property
    def delivered(self) -> bool:
        """The cancel took effect (pending) or reached the running task's worker."""
        return self in (CancelOutcome.CANCELLED, CancelOutcome.CANCELLING)

    @property
    def message(self) -> str:
        return {
            CancelOutcome.CANCELLED: "cancelled; it will not run",
            CancelOutcome.ALREADY_CANCELLED: "was already cancelled",
            CancelOutcome.CANCELLING: (
                "is running; its worker stops it within a second (cancelled, not retried)"
            ),
            CancelOutcome.NOT_PENDING: (
                "is not pending: it finished, failed, or no such task was dispatched; not cancelled"
            ),
        }[self]


@dataclass(frozen=True)
class CancelResult:
    id: str
    queue: str | None
    outcome: CancelOutcome


_ANSWERS = {
    1: CancelOutcome.CANCELLED,
    2: CancelOutcome.ALREADY_CANCELLED,
    3: CancelOutcome.CANCELLING,
}


def cancel(queue: RedisQueue, task_id: str, queue_name: str, fail: bool = False) -> CancelOutcome:
    """Cancel ``task_id`` on ``queue_name``: at once if it is still ready or delayed, by
    a request to its worker if it runs. ``fail``: a running task is filed in the failed
    list too once it stops (a pending one never ran: there is no failure to file)."""
    try:
        raw = raw_id(task_id)
    except ValueError:
        return CancelOutcome.NOT_PENDING  # not an id any task could have
    call = calls.cancel(queue.keys(queue_name), task_id, raw, fail)
    answer = int(queue.scripts.cancel(queue.client, *call))
    return _ANSWERS.get(answer, CancelOutcome.NOT_PENDING)


def cancel_anywhere(
    queue: RedisQueue, task_id: str, queues: Sequence[str] | None = None, fail: bool = False
) -> CancelResult:
    """Cancel by id alone: try each known queue (one O(1) call per queue, not per task)."""
    names = list(queues) if queues else queue.known_queues()
    try:
        stored = raw_id(task_id)
    except ValueError:
        return CancelResult(task_id, None, CancelOutcome.NOT_PENDING)
    pipe = queue.client.pipeline(transaction=False)
    for name in names:
        pipe.sismember(queue.keys(name).pending_ids, stored)  # type: ignore[arg-type]
    for name, pending in zip(names, pipe.execute(), strict=True):
        if pending:
            return CancelResult(task_id, name, cancel(queue, task_id, name, fail))
    for name in names:
        result = cancel(queue, task_id, name, fail)
        if result is not CancelOutcome.NOT_PENDING:
            return CancelResult(task_id, name, result)
    return CancelResult(task_id, None, CancelOutcome.NOT_PENDING)


def requests(queue: RedisQueue, queue_names: Sequence[str]) -> dict[str, set[str]]:
    """The ids (hex) whose cancel was requested while they ran, by queue: one pipelined
    HKEYS per queue (a worker parent asks this only while its children run tasks)."""
    pipe = queue.client.pipeline(transaction=False)
    for name in queue_names:
        pipe.hkeys(queue.keys(name).cancelling)
    found: dict[str, set[str]] = {}
    for name, raw_ids in zip(queue_names, pipe.execute(), strict=True):
        # From Redis: anything but 16 raw bytes is no task's id, and is left to prune.
        ids = {r.hex() for r in raw_ids if isinstance(r, bytes) and len(r) == 16}
        if ids:
            found[name] = ids
    return found


def settle(
    queue: RedisQueue, queue_name: str, reserved: bytes, task_id: str, record: bytes, fail: bool
) -> int:
    """A running task stopped for its cancel: settled as cancelled (settle_cancelled.lua):
    1, or 2 if filed in the failed list too (``fail``, or its request asked it); 0 if it
    was no longer reserved (settled already)."""
    call = calls.settle_cancelled(
        queue.keys(queue_name), reserved, task_id, record, fail, queue.config.events
    )
    return int(queue.scripts.settle_cancelled(queue.wire, *call))


def prune(queue: RedisQueue, queue_names: Sequence[str]) -> int:
    """Forget the requests of tasks no longer running (prune_cancelling.lua); how many."""
    pipe = queue.client.pipeline(transaction=False)
    for name in queue_names:
        keys = queue.keys(name)
        queue.scripts.prune_cancelling.queue(pipe, [keys.reserved, keys.cancelling], [])
    return sum(int(n) for n in execute(pipe, queue.scripts))
