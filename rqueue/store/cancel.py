"""Cancel a task that has not started, by its id, without scanning its queue.

push.lua records each pushed task's id in the queue's ``pending-ids`` set and
reserve.lua removes it, so "is it still pending?" is one O(1) set operation.
cancel.lua moves a pending id to the ``cancelled`` set; the payload itself stays in
the ready list or the delayed zset (removing it from a list would be a scan) and
reserve.lua drops it, unrun, when it reaches the front. Until then it is counted
out of the queue's sizes (``QueueSize.counted_out``): a cancelled timer is no work for
``--stop-when-drained`` to wait for. Only a task that is not
pending costs more: the queue's reserved set (the tasks in flight, a handful) is
read to say whether it is running.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from rqueue.store.header import payload_id, raw_id
from rqueue.store.queue import RedisQueue


class CancelOutcome(enum.Enum):
    CANCELLED = "cancelled"
    ALREADY_CANCELLED = "already cancelled"
    RUNNING = "running"
    NOT_PENDING = "not pending"

    def __bool__(self) -> bool:
        return self is CancelOutcome.CANCELLED

    @property
    def message(self) -> str:
        return {
            CancelOutcome.CANCELLED: "cancelled; it will not run",
            CancelOutcome.ALREADY_CANCELLED: "was already cancelled",
            CancelOutcome.RUNNING: "is running (reserved by a worker); not cancelled",
            CancelOutcome.NOT_PENDING: (
                "is not pending: it finished, failed, or no such task was dispatched; not cancelled"
            ),
        }[self]


@dataclass(frozen=True)
class CancelResult:
    id: str
    queue: str | None
    outcome: CancelOutcome


def cancel(queue: RedisQueue, task_id: str, queue_name: str) -> CancelOutcome:
    """Cancel ``task_id`` on ``queue_name`` if it is still ready or delayed."""
    keys = queue.keys(queue_name)
    result, done = keys.result(task_id), keys.done(task_id)
    script_keys = (
        keys.pending_ids,
        keys.cancelled,
        result,
        done,
        keys.unique,
        keys.events_on,
        keys.events,
    )
    try:
        raw = raw_id(task_id)
    except ValueError:
        return CancelOutcome.NOT_PENDING  # not an id any task could have
    answer = int(queue.scripts.cancel(queue.client, script_keys, (task_id, raw)))
    if answer == 1:
        return CancelOutcome.CANCELLED
    if answer == 2:
        return CancelOutcome.ALREADY_CANCELLED
    if any(payload_id(member) == task_id for member in queue.reserved_payloads(queue_name)):
        return CancelOutcome.RUNNING
    return CancelOutcome.NOT_PENDING


def cancel_anywhere(
    queue: RedisQueue, task_id: str, queues: Sequence[str] | None = None
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
            return CancelResult(task_id, name, cancel(queue, task_id, name))
    for name in names:
        result = cancel(queue, task_id, name)
        if result is not CancelOutcome.NOT_PENDING:
            return CancelResult(task_id, name, result)
    return CancelResult(task_id, None, CancelOutcome.NOT_PENDING)
