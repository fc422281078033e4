"""Where a task is now, by its id: what ``rqueue status`` and the dashboard's task page show.

A task leaves traces in several places, none of them complete: its payload in its
queue's ready list, delayed or reserved set while it is pending or running
(``store/browse.py``), its kept status and result if it keeps one
(``store/results.py``), its failed record once it failed for good (``failed.py``),
and its progress, if it reported any (``store/progress.py``); the workers' registry
names the queue of a task running now. :func:`locate` asks each once, its payload's
place first, so a task without ``keep_result`` still has a status while it waits or
runs. Everything read came from Redis: a record or payload
that does not read is said so, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass

from rqueue.encoding.payload import Job, readable
from rqueue.errors import InvalidPayload
from rqueue.failed import FailedTask, FailedTasks
from rqueue.metrics.registry import list_workers
from rqueue.store import browse
from rqueue.store.dependencies import read_waiting
from rqueue.store.progress import Progress
from rqueue.store.progress import read as read_progress
from rqueue.store.queue import RedisQueue
from rqueue.store.results import TaskStatus, find_queue, read_status


@dataclass(frozen=True)
class Whereabouts:
    """What is known of one task, and where."""

    task_id: str
    queue: str | None
    """Its queue's name, if anything names it."""
    state: str
    """``ready``, ``delayed``, ``running`` (its payload found there), ``waiting`` (for
    the tasks it was dispatched ``after``), ``queued`` (pending,
    further down its list than was looked), ``cancelled``, its kept status
    (``succeeded``, ``failed``...), ``failed`` (its failed record), or ``""``: nothing
    knows it."""
    held: browse.Found | None
    """Where its payload was found (ready, delayed or running), if it was."""
    job: Job | None
    """Its payload, decoded: from its list, or from its failed record."""
    payload_problem: str
    """Why its payload does not decode (``""``: it does, or none was found)."""
    status: TaskStatus | None
    """Its kept status, if it keeps one and it has not expired."""
    status_problem: str
    """Why its kept record does not read (``""``: it does, or it has none)."""
    failed: FailedTask | None
    pending: bool
    """Its id is in its queue's pending set: ready or delayed, not yet running."""
    progress: Progress | None

    @property
    def tags(self) -> tuple[str, ...]:
        """Its tags: from its payload, else its kept record."""
        if self.job is not None:
            return self.job.tags
        record = self.status.record if self.status is not None else {}
        return tuple(record.get("tags") or ())


def locate(
    queue: RedisQueue, task_id: str, queue_name: str | None = None, near: int = 0
) -> Whereabouts:
    """Everything known of ``task_id``; ``queue_name`` if the caller knows its queue (else
    it is looked for), ``near`` where a list showed it (its payload is looked for there)."""
    status, status_problem = None, ""
    queue_name = queue_name or find_queue(queue, task_id)
    if queue_name is not None:
        try:
            status = read_status(queue, queue_name, task_id)
        except InvalidPayload as exc:  # a record altered in Redis
            status_problem = str(exc)
    if status is not None and status.status == "unknown":  # expired, or keeps none
        status = None
    # Its failed record, if any: in its own queue's list when its queue is known.
    where = [queue_name] if queue_name is not None else None
    failed = FailedTasks(queue).find_all([task_id], where).get(task_id)
    if queue_name is None:
        queue_name = failed.queue if failed else browse.pending_in(queue, task_id)
    if queue_name is None:
        queue_name = _running_in(queue, task_id)
    held = browse.find_payload(queue, queue_name, task_id, near) if queue_name else None
    waiting = read_waiting(queue, queue_name, task_id)[0] if queue_name and not held else None
    payload = held.payload if held else waiting or (failed.payload if failed else None)
    job, payload_problem = None, ""
    if payload is not None:
        try:
            job = readable(payload, queue.config.keyring)
        except InvalidPayload as exc:
            payload_problem = str(exc)
    pending, cancelled = (
        browse.standing(queue, queue_name, task_id) if queue_name else (False, False)
    )
    return Whereabouts(
        task_id=task_id,
        queue=queue_name,
        state="cancelled" if cancelled else _state(held, pending, status, failed, waiting),
        held=held,
        job=job,
        payload_problem=payload_problem,
        status=status,
        status_problem=status_problem,
        failed=failed,
        pending=pending,
        progress=read_progress(queue, queue_name, task_id) if queue_name else None,
    )


def _running_in(queue: RedisQueue, task_id: str) -> str | None:
    """The queue a registered worker says it runs ``task_id`` from (its heartbeat's
    entry: a task shows there within a beat of starting), or None."""
    for worker in list_workers(queue):
        for running in worker.tasks:
            if running.id == task_id:
                return running.queue
    return None


def _state(
    held: browse.Found | None,
    pending: bool,
    status: TaskStatus | None,
    failed: FailedTask | None,
    waiting: bytes | None,
) -> str:
    """Where the task is now, as far as anything says: its payload's place first (its
    queue's waiting hash for a task waiting for others), then its kept status, then
    its failed record; ``""`` if nothing knows it."""
    if held is not None:
        return held.state
    if waiting is not None and pending:
        return "waiting"
    if pending:
        return "queued"  # ready or delayed, further down its list than was looked
    if status is not None:
        return status.status
    return "failed" if failed is not None else ""
