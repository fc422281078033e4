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

import functools
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

import msgpack
import redis

from rqueue.encoding.payload import KEEP, Job, decode, new_id
from rqueue.errors import BatchCancelled, InvalidPayload, InvalidQueueName, RQueueError
from rqueue.failed import FailedTasks
from rqueue.store import progress
from rqueue.store.batch_store import BatchStore
from rqueue.store.cancel import cancel
from rqueue.store.default import default_queue
from rqueue.store.keys import validate_queue_name
from rqueue.store.queue import RedisQueue
from rqueue.store.signing import verify
from rqueue.tasks import observers
from rqueue.tasks.current import current_job, current_run
from rqueue.tasks.definition import PendingDispatch
from rqueue.tasks.interception import current_interceptor
from rqueue.workflows.batch_results import RESULTS
from rqueue.workflows.batch_status import BatchCounts, BatchStatus, status_of, unreadable_status
from rqueue.workflows.steps import (
    ONCE_MS,
    Step,
    callback_place,
    delay_ms,
    derived_id,
    pending_calls,
    step_job,
    trusted,
)

log = logging.getLogger("rqueue.worker")

BATCH, GETS, INDEX = "batch", "gets", "index"
"""Meta entries: the batch a task counts for; what a callback is called with first;
and the member index of a chain's later task in a member (the first one's is its id)."""
KEEP_FINISHED_MS = 7 * 24 * 3600 * 1000
"""How long a finished batch stays readable (``rqueue batches prune`` removes sooner)."""
_IDS = 2**128
_LAST_ID = _IDS - 1
"""Every bit of an id set: ``n & _LAST_ID`` is ``n % _IDS``, sooner."""
_HEX_ID = re.compile(r"[0-9a-f]{32}")
_SPREAD = 0x9E3779B97F4A7C15F39CC0605CEDC835
_UNSPREAD = pow(_SPREAD, -1, _IDS)
_MAX_MEMBERS = 2**32


class Batch:
    """A handle on a batch in Redis, by id; ``batch_of(id)`` rebuilds one anywhere."""

    counted: BatchCounts | None = None
    """In a callback, the batch's counts when the member that made it due was counted
    (a ``progress`` callback's member, say), however long the callback waited in its
    queue since; ``status()`` reads them now. None elsewhere."""

    def __init__(self, batch_id: str, connection: RedisQueue | None = None) -> None:
        self.id = batch_id
        self.connection = connection
        self._store().keys(batch_id)  # checks the id

    def __repr__(self) -> str:
        return f"Batch(id={self.id!r})"

    def _store(self) -> BatchStore:
        return BatchStore(self.connection or default_queue())

    def status(self) -> BatchStatus | None:
        """The counts now; None if there is no such batch (expired, pruned or never).
        A batch whose state does not parse has ``unreadable`` set (see BatchStatus)."""
        try:
            state = self._store().read(self.id)
        except InvalidPayload as exc:
            return unreadable_status(self.id, str(exc))
        except redis.ResponseError as exc:  # not a hash
            return unreadable_status(self.id, f"the state of batch {self.id} is unreadable: {exc}")
        return None if state is None else status_of(state)

    def progress(self) -> float | None:
        """How far it has come, 0 to 1: each finished member (succeeded, failed or
        skipped) counts 1, each other its latest ``current_job().progress()`` (of the
        first 10,000 members; the others count 0 until they finish). None if there is
        no such batch, or its state does not read."""
        status = self.status()
        if status is None or status.unreadable is not None:
            return None
        if not status.total:
            return 1.0
        ids = [member_id(self.id, i) for i in range(min(status.total, progress.MOST_MEMBERS))]
        queue = self.connection or default_queue()
        keys = self._store().keys(self.id)
        running = progress.unfinished_progress(queue, keys, ids, status.queues)
        return min(1.0, (status.processed + status.skipped + running) / status.total)

    def cancel(self) -> bool:
        """Cancel it: members not started are skipped, running ones are asked to stop
        (each then counts as skipped, as ``handle.cancel()`` of a running task does).
        False if it was already; RQueueError if it has finished, when nothing is left
        to skip."""
        answer = self._store().cancel(self.id)
        if answer < 0:
            raise RQueueError(f"no batch {self.id} (expired, pruned, or never dispatched)")
        if answer == 2:
            raise RQueueError(f"batch {self.id} has finished: nothing is left to cancel")
        self._cancel_running()
        return answer == 1

    def _cancel_running(self) -> None:
        """Ask the workers running its members to stop them: its queues' reserved sets
        (the tasks in flight, few) are read, and each member there cancelled by id."""
        status = self.status()
        queue = self.connection or default_queue()
        for name in status.queues if status is not None else ():
            for payload in queue.reserved_payloads(name):
                try:
                    job = decode(payload)
                except InvalidPayload:
                    continue  # not a task: not a member either
                if job.meta.get(BATCH) == self.id:
                    cancel(queue, job.id, name)

    def cancelled(self) -> bool:
        return self._store().cancelled(self.id) is True

    def add(self, calls: Iterable[PendingDispatch]) -> list[str]:
        """Add members (Laravel's ``$batch->add``), usually from inside a member.

        From inside a member the same call of the same run adds the same members
        however often it runs; the ids of the new members are returned.
        """
        calls = pending_calls(calls, "Batch.add()")
        if not calls:
            return []
        store = self._store()
        run = current_run()
        token = new_id() if run is None else f"{run.job.id}:{run.next_add()}"
        queues = sorted({call.task.options.queue for call in calls})
        first, results = store.add(self.id, token, len(calls), queues)
        if first < 0:
            raise RQueueError(f"no batch {self.id} (expired, pruned, or never dispatched)")
        ids = []
        for offset, call in enumerate(calls):
            member = member_job(call, self.id, first + offset, results)
            queue = call.task.connection()
            config = queue.config
            payload = observers.encoded(member, config.max_payload_bytes, config.keyring)
            queue.push_once(
                member.queue, payload, round(call.delay * 1000), ONCE_MS, bool(call.task.keep_ms)
            )
            ids.append(member.id)
        return ids

    def member_id(self, index: int) -> str:
        """The task id of the member at ``index`` (0-based, in dispatch order; added
        members follow): ``result_of(b.member_id(i))`` reads its result if it keeps one."""
        return member_id(self.id, index)

    def retry(self) -> int:
        """Push the failed members back (``rqueue batches retry``, Laravel's
        ``queue:retry-batch``); how many went.

        The batch is opened again first: a first failure cancelled it (without
        ``allow_failures``), and its members would be skipped instead of run. With a
        secret, a record whose payload is not signed for its queue (planted in Redis)
        is left where it is, with a log line: it would only be refused by the worker,
        and the batch would wait for it for ever.
        """
        store = self._store()
        try:
            state = store.read(self.id)
        except redis.ResponseError as exc:  # not a hash: as unreadable as a garbled one
            raise InvalidPayload(f"the state of batch {self.id} is unreadable: {exc}") from None
        if state is None or not state.failed_ids:
            return 0
        wanted = set(state.failed_ids)
        queues = [name for name in state.queues if _valid_queue(name)]
        connection = self.connection or default_queue()
        secret = connection.config.secret
        failed = FailedTasks(connection)
        records = []
        # Looked up by id: the failed records may number millions, none of them read.
        # A member's chain may have failed at a step on another queue than its first
        # (the batch's queues): those are looked for in every queue with failures.
        found = failed.find_all(wanted, queues)
        if len(found) < len(wanted):
            found = {**failed.find_all(wanted - found.keys()), **found}
        for record in found.values():
            job = record.job()
            if job is None or job.meta.get(BATCH) != self.id:
                continue
            try:
                if secret:
                    verify(record.payload, secret, record.queue)
                records.append((member_index(job), record))
            except InvalidPayload as exc:  # a record written by hand: not one of ours
                log.error("batch %s: failed task %s is not retried: %s", self.id, record.id, exc)
        if not records:  # forgotten or flushed: reopening would leave it unfinished
            return 0
        store.reopen(self.id, [(index, record.id) for index, record in records])
        return failed.retry_many(record for _, record in records)


def batch_of(batch_id: str, connection: RedisQueue | None = None) -> Batch:
    """A handle on an existing batch, by id."""
    return Batch(batch_id, connection)


def listed_batches(
    limit: int, connection: RedisQueue | None = None
) -> list[tuple[str, BatchStatus | None]]:
    """``(id, status)`` of the newest ``limit`` batches, newest first; None for an entry
    rqueue cannot read. Batches expired or pruned are left out."""
    connection = connection or default_queue()
    rows: list[tuple[str, BatchStatus | None]] = []
    for batch_id in BatchStore(connection).listed(limit):
        try:
            status = Batch(batch_id, connection).status()
        except ValueError:  # not a batch id
            rows.append((batch_id, None))
            continue
        if status is not None:
            rows.append((batch_id, None if status.unreadable is not None else status))
    return rows


def current_batch() -> Batch | None:
    """The batch of the member running in this worker, or None."""
    job = current_job()
    if job is None or not isinstance(job.meta.get(BATCH), str):
        return None
    interceptor = current_interceptor()
    if interceptor is not None:  # sync() or a fake: a batch it opened is in memory
        found: Batch | None = interceptor.find_batch(job.meta[BATCH])
        if found is not None:
            return found
    return Batch(job.meta[BATCH])


def skip_if_batch_cancelled() -> None:
    """Inside a member: stop here, counted as skipped, if its batch was cancelled
    (Laravel's ``SkipIfBatchCancelled``), e.g. between the steps of a long member."""
    found = current_batch()
    if found is not None and found.cancelled():
        raise BatchCancelled(f"batch {found.id} was cancelled")


def member_index(job: Job) -> int:
    """The member's index in its batch, read off its id, or off its meta for a chain's
    later task in a member; InvalidPayload if it is not one."""
    batch_id = job.meta.get(BATCH)
    index = job.meta.get(INDEX, -1)
    if INDEX not in job.meta:
        index = _index(batch_id, job.id) if isinstance(batch_id, str) else -1
    elif type(index) is not int:
        index = -1
    if not 0 <= index < _MAX_MEMBERS:
        raise InvalidPayload(f"task {job.id} is not a member of batch {batch_id!r}")
    return index


def _index(batch_id: str, task_id: str) -> int:
    """Not remembered: a worker reads it once per attempt (``effects.check``, whose
    answer its completion takes), and a cache's upkeep cost more than the reading."""
    base = _id_number(batch_id)
    if base is None or not _HEX_ID.fullmatch(task_id):
        return -1
    return (((int(task_id, 16) - base) * _UNSPREAD) & _LAST_ID) - 1


@functools.lru_cache(maxsize=16)
def _id_number(batch_id: str) -> int | None:
    """A batch's id as a number (None: not an id), read once for all its members."""
    return int(batch_id, 16) if _HEX_ID.fullmatch(batch_id) else None


def member_job(call: PendingDispatch, batch_id: str, index: int, results: bool = False) -> Job:
    job = call.task.make_job(call.args, call.kwargs, meta=member_meta(batch_id, results))
    job.id = member_id(batch_id, index)
    return job


def member_meta(batch_id: str, results: bool) -> dict[str, Any]:
    """A member's meta: its batch, and whether it sends its result when counted."""
    return {BATCH: batch_id, RESULTS: True} if results else {BATCH: batch_id}


def member_id(batch_id: str, index: int) -> str:
    """A member's task id: the batch's id plus ``index + 1`` times an odd constant,
    modulo 2**128, so the index can be read back (:func:`member_index`) and every digit
    differs from one member to the next. Ids that differ in their last digits only
    would make Redis's Lua hash every member's payload alike (it hashes a long string
    from a sample of its bytes), which slowed every script that takes them threefold."""
    return f"{(int(batch_id, 16) + (index + 1) * _SPREAD) % _IDS:032x}"


def push_callbacks(
    queue: RedisQueue,
    batch_id: str,
    index: int,
    packed: bytes,
    due: Iterable[str],
    counts: BatchCounts,
) -> None:
    """Push the callbacks due, each once (derived ids, push_once.lua); ``index`` is
    the member whose completion made them due, ``counts`` the batch's then (the
    callback's ``Batch.counted``). A callback that is malformed, or with a secret not
    signed for this batch and role (the batch's hash was written by hand), is logged
    and left out: the member's outcome stands."""
    try:
        callbacks = msgpack.unpackb(packed, raw=False)
    except Exception as exc:
        log.error("batch %s: its callbacks are unreadable (%r); none pushed", batch_id, exc)
        return
    for name in due:
        step = callbacks.get(name) if type(callbacks) is dict else None
        if step is None:
            continue
        what = f"progress:{index}" if name == "progress" else name
        try:
            step = trusted(step, queue.config.secret, callback_place(batch_id, name))
            gets = callback_gets(batch_id, counts, step)
            config = queue.config
            job = step_job(step, derived_id(batch_id, what), {GETS: gets}, (), config.keyring)
            payload = observers.encoded(job, config.max_payload_bytes, config.keyring)
        except RQueueError as exc:  # InvalidSignature included
            log.error("batch %s: its %s callback is refused: %s", batch_id, name, exc)
            continue
        kept = bool(job.meta.get(KEEP))
        # At the head of its queue: it runs as its member finished, not after the rest.
        queue.push_once(job.queue, payload, delay_ms(step), ONCE_MS, kept, first=True)


def callback_gets(batch_id: str, counts: Sequence[int], step: Step) -> list[Any]:
    """A callback's ``gets`` meta: its batch and the counts of its moment, and
    ``results`` if it gets the members' results too."""
    gets: list[Any] = [BATCH, batch_id, list(counts)]
    if step.get(RESULTS) is True:
        gets.append(RESULTS)
    return gets


def _valid_queue(name: str) -> bool:
    """A queue name read from the batch's set (Redis: it may be anything) is one."""
    try:
        validate_queue_name(name)
    except InvalidQueueName:
        return False
    return True
