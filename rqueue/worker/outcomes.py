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

import logging
import time
import traceback
from dataclasses import replace

import redis

from rqueue.encoding.payload import KEEP, Job, decode
from rqueue.errors import InvalidPayload, RQueueError, TaskTimeout, describe, utf8
from rqueue.failed import make_record
from rqueue.metrics.collector import UNREGISTERED
from rqueue.store import cancel as cancels
from rqueue.store.queue import Kept, RedisQueue
from rqueue.store.retry import Persist
from rqueue.tasks.decorator import registered_task
from rqueue.worker import reports, rules
from rqueue.worker.attempt import Attempt
from rqueue.worker.logs import log_outcome
from rqueue.worker.options import WorkerOptions
from rqueue.worker.participants import Roster
from rqueue.worker.scoreboard import Slot, State
from rqueue.worker.verdicts import Cancelled, Failed
from rqueue.workflows import effects

log = logging.getLogger("rqueue.worker")


class Outcomes:
    """Reports one child's outcomes; built once, when the child starts.

    ``entry`` is the task's place in the batch the child's slot holds; ``persist``
    is the child's: it retries a change until Redis takes it, backing off as the
    child does. The participants of each attempt (``participants.py``) are told its
    outcome once it is filed; ``roster`` picks them for a payload that never became an
    attempt.
    """

    def __init__(
        self,
        store: RedisQueue,
        options: WorkerOptions,
        slot: Slot,
        persist: Persist,
        roster: Roster,
    ) -> None:
        self.store = store
        self.options = options
        self.slot = slot
        self.persist = persist
        self.roster = roster

    def failed(self, attempt: Attempt, failed: Failed, duration: float) -> None:
        """An attempt failed (raised, or timed out): retry it later, or fail it for good,
        as :func:`retry_in` decides (no tries left, a participant says so:
        ``max_exceptions``, or ``failed.final``)."""
        queue, payload, job, exc = attempt.queue, attempt.payload, attempt.job, failed.exc
        timed_out = isinstance(exc, TaskTimeout)
        # The task has stopped: no kill deadline while Redis is slow to take its outcome
        # (still RUNNING, so a death here is settled by the parent as a crash).
        self.slot.set(State.RUNNING, attempt.entry)
        delay = retry_in(attempt, failed)
        kind, message = describe(exc)
        message = _cut(message, "start")
        released = delay is not None and release_for_retry(
            self.store, self.persist, queue, payload, job, delay, kind
        )
        if released is CANCEL_REQUESTED:  # its cancel came first: no retry
            self.cancelled(attempt, Cancelled(exc), duration)
            return
        if delay is not None and not released:
            delay, message = None, f"{message} (and Redis refused its release for a retry)"
        will_retry = delay is not None
        if will_retry:
            for participant in attempt.participants:
                participant.after_retried(queue, job, duration)
        else:
            trace = _traceback(exc)
            record = make_record(queue, payload, kind, message, trace, job, timed_out)
            kept = self.complete_failure(job, payload, kind, message, trace, duration)
            file_failure(self.store, self.persist, queue, payload, job, record, kept)
            for participant in attempt.participants:
                participant.after_failed(queue, job, duration)
        self.reporting(attempt.entry)
        outcome = "timed out" if timed_out else f"raised {kind}: {_cut(message, 'start', _LOGGED)}"
        log_outcome(
            log,
            job,
            f"{outcome}; {'will retry' if will_retry else 'failed'}",
            duration,
            logging.WARNING if will_retry else logging.ERROR,
        )
        reports.raised(job, exc, will_retry, duration)
        if not will_retry:
            reports.failed(registered_task(job.task), job, exc)

    def cancelled(self, attempt: Attempt, verdict: Cancelled, duration: float) -> None:
        """It stopped for its cancel: settled as cancelled (never retried), its
        participants told, then its ``after_cancelled`` hook and ``cancelled`` listeners."""
        queue, job = attempt.queue, attempt.job
        self.slot.set(State.RUNNING, attempt.entry)  # stopped: no kill deadline meanwhile
        settle_cancelled(self.store, self.persist, queue, attempt.payload, job, duration)
        for participant in attempt.participants:
            participant.after_cancelled(queue, job, duration)
        self.reporting(attempt.entry)
        log_outcome(log, job, "cancelled", duration)
        reports.cancelled(registered_task(job.task), job, verdict.exc)

    def rejected(
        self, entry: int, queue: str, payload: bytes, job: Job | None, kind: str, message: str
    ) -> None:
        """Fail a payload that cannot run at all, without retrying it."""
        record = make_record(queue, payload, kind, message, job=job)
        foreign = job is None
        kept = None if job is None else self.complete_failure(job, payload, kind, message, "", 0.0)
        file_failure(self.store, self.persist, queue, payload, job, record, kept, foreign)
        for participant in self.roster.of(job):
            participant.after_failed(queue, job, None)
        self.reporting(entry)
        log.error("%s %s %s: %s", queue, job.task if job else "-", kind, message)
        if job is not None:
            reports.failed(registered_task(job.task), job, None)

    def refused(self, attempt: Attempt, kind: str, message: str) -> None:
        """Fail an attempt that cannot run at all (see :meth:`rejected`)."""
        self.rejected(attempt.entry, attempt.queue, attempt.payload, attempt.job, kind, message)

    def ack_refused(
        self, queue: str, payload: bytes, message: str, kind: str = "ResponseError"
    ) -> None:
        """A success whose acknowledgement Redis refused (a command error, most likely
        over its result record), or its batch's count of it (see reservations.py), or
        whose value its batch could not keep (``kind`` ResultTooLarge: counted as
        failed there): failed alone, with the reason (``message``), instead of retried
        for ever while the tasks behind it wait. Its workflow went on already: only its
        result record tells of this, and only the metrics hear of it (its lock and its
        count went with its success)."""
        try:
            job: Job | None = decode(payload)
        except InvalidPayload:
            job = None
        record = make_record(queue, payload, kind, message, job=job)
        kept = None
        if job is not None:
            kept_only = replace(job, meta={KEEP: job.meta.get(KEEP)})  # no workflow steps
            now = time.time()
            kept = effects.on_failure(kept_only, payload, kind, message, "", now, None).kept
        file_failure(self.store, self.persist, queue, payload, job, record, kept)
        for participant in self.roster.plain:
            participant.after_failed(queue, job, None)
        log.error("%s %s %s: %s", queue, job.task if job else "-", kind, message)

    def complete_failure(
        self, job: Job, payload: bytes, kind: str, message: str, trace: str, duration: float
    ) -> Kept | None:
        """A workflow's part of a failure for good: the catch step and the batch member
        counted now (idempotently, before the task is failed), the result record
        returned to be written with the failure. Nothing for a plain task."""
        return complete_failure(
            self.store, self.persist, job, payload, kind, message, trace, duration
        )

    def reporting(self, entry: int) -> None:
        """Counted as processed; its hooks and listeners get the default timeout to run."""
        self.slot.count_processed()
        self.slot.set(State.REPORTING, entry + 1, time.monotonic() + self.options.timeout)


def retry_in(attempt: Attempt, failed: Failed) -> float | None:
    """Seconds before the failed attempt's retry, or None: it fails for good now (no
    tries left, :func:`retry_delay`'s other cases, or a participant refuses the retry:
    ``max_exceptions``, counted as it is asked)."""
    job = attempt.job
    delay = None
    if not failed.final:
        timed_out = isinstance(failed.exc, TaskTimeout)
        delay = retry_delay(job, job.attempts, attempt.tries, timed_out, failed.backoff)
    return rules.retry_after(attempt, failed.exc, delay)


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


def file_failure(
    store: RedisQueue,
    persist: Persist,
    queue: str,
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
        persist(lambda: store.fail(queue, payload, record, force=force, kept=kept))
        return
    except redis.ResponseError as exc:
        refusal = describe(exc)[1]
    if kept is not None:
        try:
            persist(lambda: store.fail(queue, payload, record, force=force))
            log.error("%s %s: Redis refused its result record: %s", queue, task, refusal)
            return
        except redis.ResponseError as exc:
            refusal = describe(exc)[1]
    log.error(
        "%s %s: Redis refused to record its failure (%s); it stays reserved until its "
        "reservation runs out",
        queue,
        task,
        refusal,
    )


CANCEL_REQUESTED = "cancel requested"
""":func:`release_for_retry`'s answer for a task whose cancel was requested: it stays
reserved (release.lua refuses it a retry) and the caller settles it as cancelled."""


def release_for_retry(
    store: RedisQueue,
    persist: Persist,
    queue: str,
    payload: bytes,
    job: Job,
    delay: float,
    error: str,
) -> bool | str:
    """Put the task back for a retry in ``delay`` seconds after an attempt that raised
    ``error`` (its type's name); False if Redis refused that (a command error: the
    caller fails the task instead of looping), :data:`CANCEL_REQUESTED` if its cancel
    was requested (the caller settles it as cancelled)."""
    try:
        moved = persist(lambda: store.release(queue, [payload], delay, error=error))
    except redis.ResponseError as exc:
        log.error("%s %s: Redis refused its release: %s", queue, job.task, describe(exc)[1])
        return False
    return CANCEL_REQUESTED if moved < 0 else True


def settle_cancelled(
    store: RedisQueue,
    persist: Persist,
    queue: str,
    payload: bytes,
    job: Job,
    duration: float | None,
) -> None:
    """Settle a task cancelled while it ran (settle_cancelled.lua), its workflow's part
    first (``effects.on_cancel``: a batch member counted, a chain stopped), as a failure's
    is. Filed in the failed list too if its cancel asked (``rqueue cancel --fail``). The
    child and the parent (for a child it killed for ignoring a cancel) both settle so."""
    completion = effects.on_cancel(job) if job.meta else None
    if completion is not None:
        try:
            persist(lambda: effects.apply(completion, store))
        except (RQueueError, redis.ResponseError) as exc:  # cancelled all the same
            log.error("task %s (%s): its batch could not count it: %s", job.task, job.id, exc)
    message = "cancelled while it ran" + ("" if duration is None else f" ({duration:.3f} s)")
    record = make_record(queue, payload, "TaskCancelled", message, job=job)
    try:
        persist(lambda: cancels.settle(store, queue, payload, job.id, record, False))
    except redis.ResponseError as exc:  # a command error: its reservation's expiry takes over
        log.error("%s %s: Redis refused to settle its cancel: %s", queue, job.task, exc)


def complete_failure(
    store: RedisQueue,
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
            job, payload, kind, message, trace, started_at, store.config.max_payload_bytes
        )
    except RQueueError as exc:  # malformed workflow entries: the task fails all the same
        log.error("task %s (%s): its workflow cannot go on: %s", job.task, job.id, exc)
        return None
    try:
        persist(lambda: effects.apply(completion, store))
    except (RQueueError, redis.ResponseError) as exc:  # refused for good: fail it all the same
        log.error("task %s (%s): its workflow could not go on: %s", job.task, job.id, exc)
    return completion.kept


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
