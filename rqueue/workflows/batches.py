"""Batches (Laravel's ``Bus::batch``; Celery's group and chord): run many tasks, and
act once when the first fails, when all succeeded, and when all finished.

    b = batch([resize.pending(i) for i in ids]).then(notify).catch(report).dispatch()

The batch is created in Redis before any member is pushed, so a member that finishes
at once cannot finish the batch early. Each member's id is the batch's id (its first
24 digits) plus its index, so a worker knows where to count it from the payload
alone, and counting is by that index (store/lua/batch_member.lua): exact however
often a member runs. Callbacks are tasks, run by a worker with the batch as first
argument, so they fire even if the process that dispatched the batch is gone.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from rqueue.current import current_job
from rqueue.errors import BatchCancelled, InvalidPayload, RQueueError
from rqueue.failed import FailedTasks
from rqueue.payload import KEEP, Job, PayloadTemplate, new_id
from rqueue.store.batch_store import BatchState, BatchStore
from rqueue.store.default import default_queue
from rqueue.store.queue import Push, RedisQueue
from rqueue.task import PendingDispatch, Task
from rqueue.workflows.steps import ONCE_MS, Step, delay_ms, derived_id, step_job, step_of

BATCH, GETS = "batch", "gets"
KEEP_FINISHED_MS = 7 * 24 * 3600 * 1000
"""How long a finished batch stays readable (``rqueue batches prune`` removes sooner)."""
CALLBACKS = ("then", "catch", "finally", "progress")


@dataclass(frozen=True)
class BatchStatus:
    """A batch's counts and times, as ``Batch.status()`` reads them."""

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

    @property
    def progress(self) -> float:
        """Percent of the members processed (succeeded or failed), 0 to 100."""
        return 100.0 if not self.total else 100.0 * self.processed / self.total


class Batch:
    """A handle on a batch in Redis, by id; ``batch_of(id)`` rebuilds one anywhere."""

    def __init__(self, batch_id: str, connection: RedisQueue | None = None) -> None:
        self.id = batch_id
        self.connection = connection
        self._store().keys(batch_id)  # checks the id

    def __repr__(self) -> str:
        return f"Batch(id={self.id!r})"

    def _store(self) -> BatchStore:
        return BatchStore(self.connection or default_queue())

    def status(self) -> BatchStatus | None:
        """The counts now; None if there is no such batch (expired, pruned or never)."""
        state = self._store().read(self.id)
        return None if state is None else _status(state)

    def cancel(self) -> bool:
        """Cancel it: members not started are skipped. False if it was already."""
        answer = self._store().cancel(self.id)
        if answer < 0:
            raise RQueueError(f"no batch {self.id} (expired, pruned, or never dispatched)")
        return answer == 1

    def cancelled(self) -> bool:
        return self._store().cancelled(self.id) is True

    def add(self, calls: Iterable[PendingDispatch]) -> list[str]:
        """Add members (Laravel's ``$batch->add``), usually from inside a member.

        From inside a member the same call of the same run adds the same members
        however often it runs; the ids of the new members are returned.
        """
        calls = list(calls)
        if not calls:
            return []
        store = self._store()
        job = current_job()
        token = new_id() if job is None else f"{job.id}:{_next_add(job)}"
        queues = sorted({call.task.options.queue for call in calls})
        first = store.add(self.id, token, len(calls), queues)
        if first < 0:
            raise RQueueError(f"no batch {self.id} (expired, pruned, or never dispatched)")
        ids = []
        for offset, call in enumerate(calls):
            member = member_job(call, self.id, first + offset)
            queue = call.task.connection()
            payload = PayloadTemplate(member).encode(member.id, member.args, member.kwargs)
            queue.push_once(
                member.queue, payload, round(call.delay * 1000), ONCE_MS, bool(call.task.keep_ms)
            )
            ids.append(member.id)
        return ids

    def retry(self) -> int:
        """Push the failed members back (``rqueue batches retry``); how many went."""
        state = self._store().read(self.id)
        if state is None:
            return 0
        wanted = set(state.failed_ids)
        failed = FailedTasks(self.connection or default_queue())
        return sum(failed.retry(f) for f in failed.list(state.queues) if f.id in wanted)


class PendingBatch:
    """A batch being built; nothing is sent until :meth:`dispatch`."""

    def __init__(self, calls: Iterable[PendingDispatch]) -> None:
        self.calls = list(calls)
        self._callbacks: dict[str, Step] = {}
        self._name = ""
        self._allow_failures = False

    def then(self, callback: Task[Any, Any] | PendingDispatch) -> PendingBatch:
        """Run once every member succeeded."""
        return self._on("then", callback)

    def catch(self, callback: Task[Any, Any] | PendingDispatch) -> PendingBatch:
        """Run once, on the first member to fail for good."""
        return self._on("catch", callback)

    def finally_(self, callback: Task[Any, Any] | PendingDispatch) -> PendingBatch:
        """Run once every member finished, succeeded, failed or skipped."""
        return self._on("finally", callback)

    def progress(self, callback: Task[Any, Any] | PendingDispatch) -> PendingBatch:
        """Run after each member that succeeds."""
        return self._on("progress", callback)

    def allow_failures(self, allow: bool = True) -> PendingBatch:
        """Keep going after a failure (otherwise the first failure cancels the batch)."""
        self._allow_failures = allow
        return self

    def name(self, name: str) -> PendingBatch:
        self._name = name
        return self

    def _on(self, what: str, callback: Task[Any, Any] | PendingDispatch) -> PendingBatch:
        call = callback.pending() if isinstance(callback, Task) else callback
        self._callbacks[what] = step_of(call)
        return self

    def dispatch(self, connection: RedisQueue | None = None) -> Batch:
        """Create the batch, then push its members; returns its handle."""
        queue = connection or (self.calls[0].task.connection() if self.calls else default_queue())
        batch_id = new_id()
        callbacks = msgpack.packb(self._callbacks, use_bin_type=True, datetime=True)
        queues = sorted({call.task.options.queue for call in self.calls})
        store = BatchStore(queue)
        store.open(
            batch_id,
            len(self.calls),
            self._name,
            self._allow_failures,
            callbacks,
            KEEP_FINISHED_MS,
            queues,
        )
        _push_members(self.calls, batch_id)
        if not self.calls:  # nothing will ever complete: then and finally are due now
            for what in ("then", "finally"):
                if what in self._callbacks:
                    job = callback_job(self._callbacks[what], batch_id, what)
                    payload = PayloadTemplate(job).encode(job.id, job.args, job.kwargs)
                    queue.push_once(
                        job.queue,
                        payload,
                        delay_ms(self._callbacks[what]),
                        ONCE_MS,
                        bool(job.meta.get(KEEP)),
                    )
        return Batch(batch_id, queue)


def batch(calls: Iterable[PendingDispatch]) -> PendingBatch:
    """Start building a batch of ``pending()`` calls; see :class:`PendingBatch`."""
    return PendingBatch(calls)


def batch_of(batch_id: str, connection: RedisQueue | None = None) -> Batch:
    """A handle on an existing batch, by id."""
    return Batch(batch_id, connection)


def current_batch() -> Batch | None:
    """The batch of the member running in this worker, or None."""
    job = current_job()
    if job is None or not isinstance(job.meta.get(BATCH), str):
        return None
    return Batch(job.meta[BATCH])


def skip_if_batch_cancelled() -> None:
    """Inside a member: stop here, counted as skipped, if its batch was cancelled
    (Laravel's ``SkipIfBatchCancelled``), e.g. between the steps of a long member."""
    found = current_batch()
    if found is not None and found.cancelled():
        raise BatchCancelled(f"batch {found.id} was cancelled")


def member_index(job: Job) -> int:
    """The member's index in its batch, read off its id; InvalidPayload if it is not one."""
    batch_id = job.meta.get(BATCH)
    if not isinstance(batch_id, str) or len(batch_id) != 32 or job.id[:24] != batch_id[:24]:
        raise InvalidPayload(
            f"task {job.id} claims batch {batch_id!r}, whose ids it does not share"
        )
    try:
        return int(job.id[24:], 16)
    except ValueError:
        raise InvalidPayload(f"task {job.id} is not a member id of batch {batch_id}") from None


def member_job(call: PendingDispatch, batch_id: str, index: int) -> Job:
    job = call.task.make_job(call.args, call.kwargs, meta={BATCH: batch_id})
    job.id = f"{batch_id[:24]}{index:08x}"
    return job


def callback_job(step: Step, batch_id: str, what: str) -> Job:
    return step_job(step, derived_id(batch_id, what), {GETS: [BATCH, batch_id]})


def _push_members(calls: Sequence[PendingDispatch], batch_id: str) -> None:
    """Push the members: one template per task (its options), one round trip per node."""
    groups: dict[tuple[int, str, int], tuple[RedisQueue, Push]] = {}
    templates: dict[int, PayloadTemplate] = {}
    now = time.time()
    for index, call in enumerate(calls):
        task = call.task
        template = templates.get(id(task))
        if template is None:
            task.check_dispatchable()
            template = templates[id(task)] = PayloadTemplate(
                task.make_job((), {}, {BATCH: batch_id}, now)
            )
        queue = task.connection()
        member_id = f"{batch_id[:24]}{index:08x}"
        payload = template.encode(member_id, call.args, call.kwargs, queue.config.max_payload_bytes)
        key = (id(queue), task.options.queue, round(call.delay * 1000))
        entry = groups.get(key)
        if entry is None:
            entry = groups[key] = (queue, Push(key[1], key[2], [], frozenset(), 0))
        push = entry[1]
        push.payloads.append(payload)  # type: ignore[attr-defined]
        if task.keep_ms:
            groups[key] = (
                queue,
                push._replace(
                    kept=push.kept | {member_id}, keep_ms=max(push.keep_ms, task.keep_ms)
                ),
            )
    by_connection: dict[int, tuple[RedisQueue, list[Push]]] = {}
    for (connection_id, _, _), (queue, push) in groups.items():
        by_connection.setdefault(connection_id, (queue, []))[1].append(push)
    for queue, pushes in by_connection.values():
        queue.push_many(pushes)


_adds: list[Any] = [None, 0]
"""The job whose ``add()`` calls are being counted, and how many it made: one job runs
at a time in a worker child, and a fresh Job object each run restarts the count."""


def _next_add(job: Job) -> int:
    if _adds[0] is not job:
        _adds[:] = [job, 0]
    _adds[1] += 1
    return int(_adds[1])


def _status(state: BatchState) -> BatchStatus:
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
    )
