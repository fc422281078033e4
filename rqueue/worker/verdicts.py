"""What happens to an attempt that raised: one decision, for every mode.

A worker child's lifecycle (``lifecycle.py``, and the concurrent runner through it)
and the inline runner of ``sync()`` and fakes (``rqueue.testing.inline``) settle an
attempt by the same two steps: :func:`of_raised` says what its exception means (a
:data:`Verdict`: skipped, cancelled, refused, released or failed), and for a failure
``outcomes.retry_in`` says whether it is retried, and when. Only what they then do
differs: a worker tells Redis, its scoreboard and its log; the inline runner keeps
the outcome in memory and runs a retry at once. So a release, a cancelled batch, a
spent try or a failure the task says no retry can help (``Fail``, ``retry_for``,
``dont_retry_for``) means one thing in every mode, written once here from the named
rules of ``rules.py``.

A success needs no decision (its workflow's completion is ``workflows/effects.py``'s)
and stays the hot path: nothing here is asked unless an attempt raised.
"""

from __future__ import annotations

from dataclasses import dataclass

from rqueue.middleware.base import Release
from rqueue.worker import releases, rules
from rqueue.worker.attempt import Attempt


@dataclass(frozen=True, slots=True)
class Skipped:
    """A member of a cancelled batch: counted as skipped, acknowledged, not run."""


@dataclass(frozen=True, slots=True)
class Cancelled:
    """It stopped for its cancel (``exc``: what it raised once the cancel reached it,
    the ``TaskCancelled`` it was given or an error it wrapped that in): settled as
    cancelled, never retried; in the failed list only if its cancel asked
    (``outcomes.py``)."""

    exc: BaseException


@dataclass(frozen=True, slots=True)
class Abandoned:
    """This worker no longer holds it (``rules.no_longer_held``): logged, nothing settled."""


@dataclass(frozen=True, slots=True)
class Refused:
    """It cannot run at all (no such task, middleware that cannot be built): failed
    without a retry, as a payload refused before it started is."""

    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class Released:
    """Put back (``Release``), due in ``release.delay`` seconds; ``by`` says who
    (``releases.py``). A middleware's release gives its attempt back; the task's
    own (``own``) uses it."""

    release: Release
    by: str

    @property
    def own(self) -> bool:
        return self.by == releases.TASK_ITSELF


@dataclass(frozen=True, slots=True)
class Failed:
    """It failed with ``exc``: retried after ``outcomes.retry_in``'s delay, or failed for
    good. ``backoff`` replaces the task's own (a middleware's ``RetryIn``); ``final``:
    no retry whatever the tries left (an error a rerun would meet again)."""

    exc: BaseException
    backoff: float | None = None
    final: bool = False


Verdict = Skipped | Cancelled | Abandoned | Refused | Released | Failed
"""What an attempt's exception means."""

SKIPPED = Skipped()
ABANDONED = Abandoned()


def of_raised(attempt: Attempt, exc: BaseException) -> Verdict:
    """What ``exc``, raised by the attempt (by its lookup, its middleware or its
    task), means, rule by rule (``rules.py``)."""
    if rules.skips_for_cancelled_batch(attempt, exc):
        return SKIPPED
    if rules.stopped_for_cancel(attempt):
        return Cancelled(exc)
    if rules.no_longer_held(attempt):
        return ABANDONED
    if rules.not_a_task(attempt, exc):
        return Refused("TaskNotRegistered", str(exc))
    if rules.middleware_unbuildable(attempt, exc):
        return Refused(type(exc).__name__, str(exc))
    if rules.stopped_by_shutdown(exc):
        assert isinstance(exc, Release)
        return Released(exc, releases.WARM_SHUTDOWN)
    if rules.is_release(exc):
        assert isinstance(exc, Release)
        return released(attempt, exc)
    if rules.never_retried(exc):  # deterministic: a rerun returns the same
        return Failed(exc, final=True)
    backoff = None
    if (asked := rules.retry_asked(exc)) is not None:  # the task's error, with a delay
        assert asked.__cause__ is not None
        exc, backoff = asked.__cause__, asked.delay
    # Asked last: every outcome that is not the task's own failure (a skip, a refusal,
    # a release, a cancel) must be decided above, or a retry_for would file it as one.
    if rules.fails_at_once(attempt, exc):  # Fail, retry_for, dont_retry_for
        return Failed(exc, final=True)
    return Failed(exc, backoff)


def released(attempt: Attempt, exc: Release) -> Released | Failed:
    """A release; but a task that releases itself on its last try fails instead of
    looping for ever (``releases.last_try``)."""
    job, tries = attempt.job, attempt.tries
    by = releases.released_by(exc, attempt.task.fn if attempt.task is not None else None)
    verdict = Released(exc, by)
    if rules.release_fails(verdict.own, job, tries):
        return Failed(releases.last_try(exc, job.attempts, tries), final=True)
    return verdict
