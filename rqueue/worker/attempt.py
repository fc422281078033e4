"""One attempt at a task, and the hook surface its features take part through.

An :class:`Attempt` is what the lifecycle (``lifecycle.py``) knows of a run while it
admits, prepares, runs and settles it, in any execution mode: process mode, the
concurrent runner's coroutines and threads (``concurrent.py``), the inline runner of
``rqueue.testing``. Its fields fill in as the run goes on (the task once looked up,
its middleware once built), so a failure at any step is settled from the same record.

A :class:`Participant` is one feature's part in attempts (unique locks, exception
counting, metrics), in the shape of Dramatiq's middleware: a few paired, named hooks
the lifecycle calls, each a no-op unless the feature overrides it. The hooks take a
queue's name and a job, not an attempt, so the parent can settle a dead child's task
through them too (``recovery.py``). Which participants an attempt has is chosen once,
from its job (``participants.py``): a plain task pays for none it does not use.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field

from rqueue.encoding.payload import Job
from rqueue.middleware.base import Middleware
from rqueue.tasks.current import Run
from rqueue.tasks.definition import Task


class Participant:
    """One feature's part in attempts. The lifecycle calls, in this order:

    - ``before_call``: the task's middleware let it start (just before its function).
    - ``call_scope``: a context its function is called in, in the call's own thread or
      coroutine (tracing makes its span current there); left as the function returns
      or raises, seeing what it raised.
    - ``retry_delay``: an attempt raised and would be retried after ``delay`` seconds;
      a participant may say None instead: fail it for good now.
    - ``after_succeeded``, ``after_retried``, ``after_failed`` (failed for good, or
      refused before it ran: ``job`` None if its payload could not be read; ``duration``
      None if it never ran) or ``after_cancelled`` (cancelled while it ran).

    Then, once the outcome is settled and logged, the application's participants (the
    task's hooks and the app's listeners, ``reports.py``) hear it, and nothing they do
    can change it: ``report_succeeded``, ``report_raised`` (every failed attempt),
    ``report_failed`` (failed for good) and ``report_cancelled``.
    """

    __slots__ = ()

    def before_call(self, queue: str, job: Job) -> None:
        """The task is about to run (its middleware let it start)."""

    def call_scope(self, queue: str, job: Job) -> AbstractContextManager[object] | None:
        """A context to call the task's function in (None: none). Asked only in a child
        whose roster has a participant that joined (``participants.join``: tracing):
        the plain path of a child without one never asks."""
        return None

    def retry_delay(self, queue: str, job: Job, delay: float, exc: BaseException) -> float | None:
        """Seconds before the next attempt, or None: no retry."""
        return delay

    def after_succeeded(self, queue: str, job: Job, duration: float) -> None:
        """The task succeeded and its success is settled."""

    def after_retried(self, queue: str, job: Job, duration: float | None) -> None:
        """The attempt failed and the task went back for another."""

    def after_failed(self, queue: str, job: Job | None, duration: float | None) -> None:
        """The task failed for good (or could not run at all) and is filed as failed."""

    def after_cancelled(self, queue: str, job: Job, duration: float | None) -> None:
        """The task was cancelled while it ran and is settled so (``duration`` None: its
        worker was killed for ignoring the cancel, and the parent settled it)."""

    def report_succeeded(
        self, task: Task[..., object], job: Job, result: object, duration: float
    ) -> None:
        """The task succeeded; its success is settled and logged."""

    def report_raised(
        self, job: Job, exc: BaseException, will_retry: bool, duration: float
    ) -> None:
        """An attempt failed (retried or not); settled and logged."""

    def report_failed(
        self, task: Task[..., object] | None, job: Job, exc: BaseException | None
    ) -> None:
        """The task failed for good (``exc`` None: refused before it ran; ``task`` None:
        not a registered task)."""

    def report_cancelled(
        self, task: Task[..., object] | None, job: Job, exc: BaseException
    ) -> None:
        """The task was cancelled while it ran (``exc``: the ``TaskCancelled`` it
        stopped with); settled and logged."""


Participants = tuple[Participant, ...]


def call_scopes(attempt: Attempt) -> ExitStack:
    """The call scopes of the attempt's participants, entered now in their order where
    the caller runs (the call's own thread or coroutine): use it in a ``with``, which
    leaves them in the reverse order."""
    scopes = ExitStack()
    try:
        for participant in attempt.participants:
            scope = participant.call_scope(attempt.queue, attempt.job)
            if scope is not None:
                scopes.enter_context(scope)
    except BaseException:
        scopes.close()
        raise
    return scopes


@dataclass(slots=True)
class Attempt(Run):
    """One run of one reserved task, from admission to its settled outcome. It is the
    run ``current_job()`` looks at (:class:`~rqueue.tasks.current.Run`), so what the
    run counts (its ``Batch.add()`` calls) lives with it."""

    entry: int
    """Its place in the child's scoreboard slot (the batch it came in)."""
    queue: str
    """The name of the queue it was reserved from."""
    payload: bytes
    job: Job
    expires_at: float
    """When its reservation runs out (monotonic, on this child's clock, early)."""
    tries: int
    """Attempts it may use: its own ``tries``, else the worker's."""
    participants: Participants
    args: tuple[object, ...] = ()
    """Its positional arguments, a batch callback's batch first."""
    workflow: bool = False
    """It is part of a chain or batch, or keeps its result (``workflows/effects.py``)."""
    member_index: int | None = None
    """Its index in its batch, if it is a batch's member: read off its id once, as its
    workflow entries are checked before it runs, for its count after."""
    timeout: float = 0.0
    started: float = 0.0
    """When it started (monotonic): its module's import is part of it."""
    task: Task[..., object] | None = None
    """Its task, once looked up (None: the lookup failed)."""
    stack: Sequence[Middleware] | None = None
    """Its middleware, once built (None: building them failed)."""
    lost: bool = field(default=False, init=False, repr=False)
    """This worker learnt it no longer holds the task: its reservation ran out or it was
    settled (an iterable task's checkpoint was refused, ``worker/iteration.py``)."""
    _adds: int = field(default=0, init=False, repr=False)
    """The run's ``Batch.add()`` calls so far (:meth:`Run.next_add`)."""

    def reserved_payload(self) -> bytes:
        return self.payload
