"""The failure rules of an attempt, as named predicates.

Every execution mode settles an attempt by these, through ``verdicts.py`` (the one
decision that ``lifecycle.py``, for a worker child's modes, and
``rqueue.testing.inline``, for ``sync()`` and ``fake().run_all()``, both call), so
what a release, a cancelled batch or a spent try means is written once. How long a
retry waits is ``outcomes.retry_delay``'s; who released a task, ``releases.py``'s.
"""

from __future__ import annotations

import time

from rqueue.encoding.payload import Job
from rqueue.errors import (
    BatchCancelled,
    Fail,
    InvalidCursor,
    InvalidPayload,
    ResultNotStored,
    TaskNotRegistered,
    TaskTimeout,
)
from rqueue.middleware.base import Parked, Release, RetryIn
from rqueue.tasks.iterable import Suspended
from rqueue.worker.attempt import Attempt
from rqueue.workflows import effects


def refused_before_start(job: Job, tries: int) -> tuple[str, str] | None:
    """Why an admitted job may not start (its failure's kind and message), or None.
    Both rules in one call, as every task asks them:

    - it was attempted more often than it may be (a crash loop the parent could not
      settle): failed before it runs again;
    - its ``retry_until`` passed before this attempt started: failed, not run.
    """
    if job.attempts > tries:
        return "MaxAttemptsExceeded", f"attempted {job.attempts} times, more than its {tries} tries"
    if job.retry_until is not None and time.time() >= job.retry_until:
        when = f"{job.retry_until:.3f}"
        return "RetryUntilPassed", f"its retry_until (epoch {when}) passed before it started"
    return None


def skips_for_cancelled_batch(attempt: Attempt, exc: BaseException) -> bool:
    """A batch member whose batch was cancelled while it ran (``BatchCancelled``, from
    ``SkipIfBatchCancelled`` or the task): skipped, as if it had not run."""
    return type(exc) is BatchCancelled and attempt.workflow and effects.is_member(attempt.job)


def stopped_for_cancel(attempt: Attempt) -> bool:
    """Its cancel reached it (``handle.cancel()``, ``rqueue cancel``): it ends cancelled,
    never retried, failed only if asked, whatever it raised then: the ``TaskCancelled``
    it was given, or an error it wrapped that in. Decided by the run's state, not by the
    exception's type: a ``TaskCancelled`` the task met otherwise (the ``result()`` of
    another task that was cancelled) is an error like any other."""
    return attempt.job.cancelled


def no_longer_held(attempt: Attempt) -> bool:
    """This worker learnt it no longer holds the task (an iterable task's checkpoint
    was refused: its reservation ran out, or a thread that overran was settled): nothing
    of it is this worker's to settle, whatever it raised then. Its retry, its failure
    and its workflow's next step are for the worker that holds it now."""
    return attempt.lost


def not_a_task(attempt: Attempt, exc: BaseException) -> bool:
    """Its name is no task's (the lookup failed): refused, not an attempt that failed
    (``TaskImportFailed``, a subclass, is one)."""
    return attempt.task is None and type(exc) is TaskNotRegistered


def middleware_unbuildable(attempt: Attempt, exc: BaseException) -> bool:
    """Its payload names middleware that cannot be built: refused."""
    return attempt.stack is None and isinstance(exc, InvalidPayload)


def is_release(exc: BaseException) -> bool:
    """A ``Release``: put back, by the task itself or by its middleware (releases.py),
    or ``Parked`` by its middleware's own script."""
    return type(exc) is Release or type(exc) is Parked


def stopped_by_shutdown(exc: BaseException) -> bool:
    """An iterable task stopped at an item boundary by a warm shutdown, checkpointed:
    put back at once, its attempt given back (an interruption is not a try)."""
    return type(exc) is Suspended


def release_fails(own: bool, job: Job, tries: int) -> bool:
    """The task released itself on its last try: it fails instead of looping for ever."""
    return own and job.attempts >= tries


def never_retried(exc: BaseException) -> bool:
    """An error a rerun would meet again (what it returned cannot be stored, a cursor
    that cannot be checkpointed or a checkpoint that cannot be read)."""
    return isinstance(exc, ResultNotStored | InvalidCursor)


def fails_at_once(attempt: Attempt, exc: BaseException) -> bool:
    """The task says a rerun cannot help: it raised ``Fail`` (``current_job().fail()``),
    or an exception its ``retry_for`` does not list, or one its ``dont_retry_for``
    does (which wins over ``retry_for``). Matched as ``except`` matches: by
    ``isinstance`` of the exception itself, not of what it was raised from.

    The options are the registered task's own (``attempt.task``, looked up by this
    worker), never a payload's: they name classes, which a payload from Redis must
    not make a worker import. A timeout is not asked (``fail_on_timeout`` decides it),
    nor an attempt whose task was not found (the lookup's own rule decides that)."""
    if isinstance(exc, Fail):
        return True
    task = attempt.task
    if task is None or isinstance(exc, TaskTimeout):
        return False
    options = task.options
    retry_for = options.retry_for
    if retry_for is not None and not isinstance(exc, retry_for):
        return True
    return isinstance(exc, options.dont_retry_for)


def retry_asked(exc: BaseException) -> RetryIn | None:
    """A middleware's ``RetryIn`` around the task's own error: retried after its delay."""
    return exc if type(exc) is RetryIn and exc.__cause__ is not None else None


def retry_after(attempt: Attempt, exc: BaseException, delay: float | None) -> float | None:
    """``delay`` (``outcomes.retry_delay``'s), unless one of the attempt's participants
    refuses the retry (``max_exceptions``): None, failed for good now."""
    for participant in attempt.participants:
        if delay is None:
            break
        delay = participant.retry_delay(attempt.queue, attempt.job, delay, exc)
    return delay
