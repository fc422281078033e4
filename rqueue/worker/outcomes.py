"""What becomes of a task that failed or could not run: queue, scoreboard, log, hooks.

The child's loop decides what runs and when, and settles a success itself (the hot
path: its ack rides on the next reserve call). The rules here decide what every
other outcome means, and they are many: a failure is released for a retry or moved
to the failed list at once, a payload that cannot run at all is failed without a
retry, the scoreboard is told first so the parent settles a child that dies half way
through correctly, and only then do the task's hooks and the app's listeners run,
none of them able to change the outcome. Kept apart so the loop stays short enough
to read and every such rule has one home.
"""

from __future__ import annotations

import inspect
import logging
import time
import traceback
from dataclasses import replace
from typing import Any

import redis

from rqueue import events
from rqueue.encoding.payload import KEEP, Job, decode
from rqueue.errors import InvalidPayload, RQueueError, TaskTimeout, describe, utf8
from rqueue.events import TaskEvent
from rqueue.failed import make_record
from rqueue.metrics.collector import UNREGISTERED, Collector, NoMetrics
from rqueue.store.queue import Kept, RedisQueue
from rqueue.store.retry import Persist
from rqueue.tasks import awaiting
from rqueue.tasks.decorator import registered_task
from rqueue.tasks.hooks import Hook, call_hook
from rqueue.worker import unique_locks
from rqueue.worker.logs import log_outcome
from rqueue.worker.options import WorkerOptions
from rqueue.worker.scoreboard import Slot, State
from rqueue.workflows import effects

log = logging.getLogger("rqueue.worker")

_COUNT_SLACK = 7 * 24 * 3600
"""Seconds a count of exceptions outlives the backoff before the task's next attempt:
a task that waits longer than a week in its queue starts counting afresh."""


class Outcomes:
    """Reports one child's outcomes; built once, when the child starts.

    ``index`` is the task's place in the batch the child's slot holds; ``persist``
    is the child's: it retries a change until Redis takes it, backing off as the
    child does.
    """

    def __init__(
        self,
        queue: RedisQueue,
        options: WorkerOptions,
        slot: Slot,
        persist: Persist,
        metrics: Collector | NoMetrics,
    ) -> None:
        self.queue = queue
        self.options = options
        self.slot = slot
        self.persist = persist
        self.metrics = metrics

    def failed(
        self,
        index: int,
        queue: str,
        payload: bytes,
        job: Job,
        tries: int,
        exc: BaseException,
        duration: float,
        retry_after: float | None = None,
        final: bool = False,
    ) -> None:
        """An attempt raised (or timed out): retry it later, or fail it for good if no
        tries are left or one of its job controls says so (:func:`retry_delay`,
        ``max_exceptions``). ``retry_after`` replaces the task's backoff (a middleware's
        own, as ThrottlesExceptions'); ``final``: no retry whatever the tries left (an
        error of rqueue's own making that a retry would meet again)."""
        timed_out = isinstance(exc, TaskTimeout)
        # The task has stopped: no kill deadline while Redis is slow to take its outcome
        # (still RUNNING, so a death here is settled by the parent as a crash).
        self.slot.set(State.RUNNING, index)
        delay = None if final else retry_delay(job, job.attempts, tries, timed_out, retry_after)
        limit = job.max_exceptions  # timeouts are not counted, nor a last failure
        if limit is not None and delay is not None and not timed_out:
            delay = None if self._count_exception(queue, job, delay) >= limit else delay
        kind, message = describe(exc)
        message = _cut(message, "start")
        if delay is not None and not release_for_retry(
            self.queue, self.persist, queue, payload, job, delay
        ):
            delay, message = None, f"{message} (and Redis refused its release for a retry)"
        will_retry = delay is not None
        if will_retry:
            self.metrics.retried(queue, counted_name(job), job, duration)
        else:
            trace = _traceback(exc)
            record = make_record(queue, payload, kind, message, trace, job, timed_out)
            kept = self.complete_failure(job, payload, kind, message, trace, duration)
            file_failure(self.queue, self.persist, queue, payload, job, record, kept)
            self.metrics.failed(queue, counted_name(job), job, duration)
            forget_exceptions(self.queue, self.persist, queue, job)
            unique_locks.on_failed(self.queue, self.persist, queue, job)
        self.reporting(index)
        outcome = "timed out" if timed_out else f"raised {kind}: {_cut(message, 'start', _LOGGED)}"
        log_outcome(
            log,
            job,
            f"{outcome}; {'will retry' if will_retry else 'failed'}",
            duration,
            logging.WARNING if will_retry else logging.ERROR,
        )
        events.emit(
            TaskEvent("exception", job, exception=exc, will_retry=will_retry, duration=duration)
        )
        if not will_retry:
            self._final_failure(job, exc)

    def rejected(
        self, index: int, queue: str, payload: bytes, job: Job | None, kind: str, message: str
    ) -> None:
        """Fail a payload that cannot run at all, without retrying it."""
        record = make_record(queue, payload, kind, message, job=job)
        foreign = job is None
        kept = None if job is None else self.complete_failure(job, payload, kind, message, "", 0.0)
        file_failure(self.queue, self.persist, queue, payload, job, record, kept, foreign)
        self.metrics.failed(queue, counted_name(job), job, None)
        if job is not None:
            forget_exceptions(self.queue, self.persist, queue, job)
            unique_locks.on_failed(self.queue, self.persist, queue, job)
        self.reporting(index)
        log.error("%s %s %s: %s", queue, job.task if job else "-", kind, message)
        if job is not None:
            self._final_failure(job, None)

    def ack_refused(self, queue: str, done: Kept, reason: str) -> None:
        """A success whose acknowledgement Redis refused (a command error, most likely
        over its result record; see reservations.py): failed alone, with Redis's
        reason, instead of retried for ever while the tasks behind it wait. Its
        workflow went on as a success already: only its result record tells of this."""
        try:
            job: Job | None = decode(done.payload)
        except InvalidPayload:
            job = None
        kind, message = "ResponseError", f"Redis refused its acknowledgement: {reason}"
        record = make_record(queue, done.payload, kind, message, job=job)
        kept = None
        if job is not None:
            kept_only = replace(job, meta={KEEP: job.meta.get(KEEP)})  # no workflow steps
            now = time.time()
            kept = effects.on_failure(kept_only, done.payload, kind, message, "", now, None).kept
        file_failure(self.queue, self.persist, queue, done.payload, job, record, kept)
        self.metrics.failed(queue, counted_name(job), job, None)
        log.error("%s %s %s: %s", queue, job.task if job else "-", kind, message)

    def complete_failure(
        self, job: Job, payload: bytes, kind: str, message: str, trace: str, duration: float
    ) -> Kept | None:
        """A workflow's part of a failure for good: the catch step and the batch member
        counted now (idempotently, before the task is failed), the result record
        returned to be written with the failure. Nothing for a plain task."""
        return complete_failure(
            self.queue, self.persist, job, payload, kind, message, trace, duration
        )

    def _count_exception(self, queue: str, job: Job, delay: float) -> int:
        """The task's exceptions so far, this one included (count_exception.lua); 0 if
        its counter is not a count (a key of another type): it is then not counted."""
        keep_ms = round((delay + _COUNT_SLACK) * 1000)
        try:
            return self.persist(lambda: self.queue.count_exception(queue, job.id, keep_ms))
        except redis.ResponseError as exc:
            log.error("task %s (%s): its exceptions cannot be counted: %s", job.task, job.id, exc)
            return 0

    def _final_failure(self, job: Job, exc: BaseException | None) -> None:
        # No import here: a task that ran is registered, and one that did not has no hook.
        task = registered_task(job.task)
        if task is not None and exc is not None and task.options.after_failed is not None:
            run_hook(task.options.after_failed, exc, job)
        events.emit(TaskEvent("failed", job, exception=exc))

    def reporting(self, index: int) -> None:
        """Counted as processed; its hooks and listeners get the default timeout to run."""
        self.slot.count_processed()
        self.slot.set(State.REPORTING, index + 1, time.monotonic() + self.options.timeout)


def retry_delay(
    job: Job, attempts: int, tries: int, timed_out: bool, backoff: float | None = None
) -> float | None:
    """Seconds before the next attempt after failed attempt ``attempts``, or None if
    the task fails for good now: no tries left, a timeout with ``fail_on_timeout``, or
    a retry that would start after its ``retry_until``. The child and the parent (for
    a task whose worker died or was killed) both decide by it. ``backoff`` (seconds)
    replaces the task's own."""
    if attempts >= tries or (timed_out and job.fail_on_timeout):
        return None
    delay = job.backoff_for(attempts) if backoff is None else backoff
    if job.retry_until is not None and time.time() + delay >= job.retry_until:
        return None
    return delay


def counted_name(job: Job | None) -> str:
    """The task name a failure is counted under: a registered task's own, else one
    name for all (a payload's name is anyone's to choose: see collector.UNREGISTERED)."""
    if job is None or registered_task(job.task) is None:
        return UNREGISTERED
    return job.task


def forget_exceptions(queue: RedisQueue, persist: Persist, name: str, job: Job) -> None:
    """A task with ``max_exceptions`` that finished for good leaves no count behind."""
    if job.max_exceptions is not None:
        persist(lambda: queue.forget_exceptions(name, job.id))


def file_failure(
    queue: RedisQueue,
    persist: Persist,
    name: str,
    payload: bytes,
    job: Job | None,
    record: bytes,
    kept: Kept | None,
    force: bool = False,
) -> None:
    """Move the task to the failed records (fail.lua). If Redis refuses that (a command
    error: an outage is ridden out), again without the result record, the likeliest one
    refused; if that is refused too, it is logged and the task left reserved, for its
    reservation's expiry to hand on: never a loop, nor a crash. The child and the parent
    (for a dead child's task) both file failures so."""
    task = job.task if job else "-"
    try:
        persist(lambda: queue.fail(name, payload, record, force=force, kept=kept))
        return
    except redis.ResponseError as exc:
        refusal = describe(exc)[1]
    if kept is not None:
        try:
            persist(lambda: queue.fail(name, payload, record, force=force))
            log.error("%s %s: Redis refused its result record: %s", name, task, refusal)
            return
        except redis.ResponseError as exc:
            refusal = describe(exc)[1]
    log.error(
        "%s %s: Redis refused to record its failure (%s); it stays reserved until its "
        "reservation runs out",
        name,
        task,
        refusal,
    )


def release_for_retry(
    queue: RedisQueue, persist: Persist, name: str, payload: bytes, job: Job, delay: float
) -> bool:
    """Put the task back for a retry in ``delay`` seconds; False if Redis refused that
    (a command error: the caller fails the task instead of looping)."""
    try:
        persist(lambda: queue.release(name, [payload], delay))
    except redis.ResponseError as exc:
        log.error("%s %s: Redis refused its release: %s", name, job.task, describe(exc)[1])
        return False
    return True


def complete_failure(
    queue: RedisQueue,
    persist: Persist,
    job: Job,
    payload: bytes,
    kind: str,
    message: str,
    trace: str,
    duration: float,
) -> Kept | None:
    """See :meth:`Outcomes.complete_failure`; the parent calls it for tasks it fails."""
    if not effects.involved(job):
        return None
    try:
        effects.check(job)
        started_at = time.time() - duration
        completion = effects.on_failure(
            job, payload, kind, message, trace, started_at, queue.config.max_payload_bytes
        )
    except RQueueError as exc:  # malformed workflow entries: the task fails all the same
        log.error("task %s (%s): its workflow cannot go on: %s", job.task, job.id, exc)
        return None
    try:
        persist(lambda: effects.apply(completion, queue))
    except (RQueueError, redis.ResponseError) as exc:  # refused for good: fail it all the same
        log.error("task %s (%s): its workflow could not go on: %s", job.task, job.id, exc)
    return completion.kept


_HOOK_RAISED = "hook %r of task %s (%s) raised; the task's outcome stands"


def run_hook(hook: Hook, value: Any, job: Job) -> None:
    """Call a task's hook; whatever it raises (SystemExit too) is logged, never passed on:
    the task's outcome stands, and a hook must not end the worker. An ``async def`` hook
    is awaited here, or scheduled on the loop running in this thread (slot mode)."""
    try:
        returned = call_hook(hook, value, job)
    except BaseException:
        log.exception(_HOOK_RAISED, hook, job.task, job.id)
        return
    if returned is not None and inspect.isawaitable(returned):  # None: a plain def's
        awaiting.finish(returned, log, _HOOK_RAISED, hook, job.task, job.id)


_FAILURE_TEXT = 64 * 1024
"""Characters kept of a failure's message (its start) and of its traceback (its start
and its end: the frames, and the error, whose message ends it). A failure record must
stay far below what Redis takes in one value: over it, Redis refuses the record by
dropping the connection, which looks like an outage and would be retried for ever.
The log line carries the message too."""


_LOGGED = 2000
"""Characters of a failure's message its log line carries (the record has more)."""


def _cut(text: str, keep: str, most: int = _FAILURE_TEXT) -> str:
    """``text``, or its first ``most`` characters (``keep="start"``) or its first and
    last half as many (``"ends"``), with a note of how many were cut."""
    cut = len(text) - most
    if cut <= 0:
        return text
    if keep == "start":
        return f"{text[:most]}... ({cut} more characters cut)"
    half = most // 2
    return f"{text[:half]}\n... ({cut} characters cut) ...\n{text[-half:]}"


def _traceback(exc: BaseException) -> str:
    """The formatted traceback, or a note: a broken exception must not stop its report."""
    try:
        return _cut(utf8("".join(traceback.format_exception(exc))), "ends")
    except Exception as failure:
        return f"(the traceback could not be formatted: {describe(failure)[1]})"
