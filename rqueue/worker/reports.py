"""The application's participants: the task's hooks and the app's listeners.

They hear an attempt's outcome once the lifecycle has settled and logged it, through
the reporting hooks of :class:`~rqueue.worker.attempt.Participant`, and nothing they do
changes it: whatever a hook raises is logged (:func:`run_hook`), and a listener's
exceptions are the events module's to log. The worker child, the parent's failure
report (``parent_failures.py``) and the inline runner of ``rqueue.testing`` (hooks
only: it emits no events) all report through them.

A plain task with no hook and no listener asks two cheap questions
(:func:`hears_success`) and calls nothing more.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from rqueue import events
from rqueue.encoding.payload import Job
from rqueue.events import TaskEvent
from rqueue.tasks import awaiting
from rqueue.tasks.definition import Task
from rqueue.tasks.hooks import Hook, call_hook
from rqueue.worker.attempt import Participant

log = logging.getLogger("rqueue.worker")

_HOOK_RAISED = "hook %r of task %s (%s) raised; the task's outcome stands"


def run_hook(hook: Hook, value: Any, job: Job) -> None:
    """Call a task's hook; whatever it raises (SystemExit too) is logged, never passed on:
    the task's outcome stands, and a hook must not end the worker. An ``async def`` hook
    is awaited here, or scheduled on the loop running in this thread (the concurrent
    runner)."""
    try:
        returned = call_hook(hook, value, job)
    except BaseException:
        log.exception(_HOOK_RAISED, hook, job.task, job.id)
        return
    if returned is not None and inspect.isawaitable(returned):  # None: a plain def's
        awaiting.finish(returned, log, _HOOK_RAISED, hook, job.task, job.id)


class TaskHooks(Participant):
    """The task's own ``after_succeeded``, ``after_failed`` and ``after_cancelled`` hooks."""

    __slots__ = ()

    def report_succeeded(
        self, task: Task[..., object], job: Job, result: object, duration: float
    ) -> None:
        if task.options.after_succeeded is not None:
            run_hook(task.options.after_succeeded, result, job)

    def report_failed(
        self, task: Task[..., object] | None, job: Job, exc: BaseException | None
    ) -> None:
        # A payload refused before it ran (exc None) calls no hook: it never was an attempt.
        if task is not None and exc is not None and task.options.after_failed is not None:
            run_hook(task.options.after_failed, exc, job)

    def report_cancelled(
        self, task: Task[..., object] | None, job: Job, exc: BaseException
    ) -> None:
        if task is not None and task.options.after_cancelled is not None:
            run_hook(task.options.after_cancelled, exc, job)


class Listeners(Participant):
    """The app's listeners (``rqueue.events``): ``processed``, ``exception``, ``failed``,
    ``cancelled``."""

    __slots__ = ()

    def report_succeeded(
        self, task: Task[..., object], job: Job, result: object, duration: float
    ) -> None:
        if events.has_listeners("processed"):  # asked again: a hook may have added one
            events.emit(TaskEvent("processed", job, result=result, duration=duration))

    def report_raised(
        self, job: Job, exc: BaseException, will_retry: bool, duration: float
    ) -> None:
        events.emit(
            TaskEvent("exception", job, exception=exc, will_retry=will_retry, duration=duration)
        )

    def report_failed(
        self, task: Task[..., object] | None, job: Job, exc: BaseException | None
    ) -> None:
        events.emit(TaskEvent("failed", job, exception=exc))

    def report_cancelled(
        self, task: Task[..., object] | None, job: Job, exc: BaseException
    ) -> None:
        events.emit(TaskEvent("cancelled", job, exception=exc))


HOOKS = TaskHooks()
APPLICATION: tuple[Participant, ...] = (HOOKS, Listeners())
"""The application's participants, in the order they hear an outcome: the task's hook
first, then the app's listeners. Stateless: one of each serves every process."""


def hears_success(task: Task[..., object]) -> bool:
    """Whether any of them hears ``task``'s success: asked before the log line, so the
    parent gives the reports a deadline of their own; asked on every success, so
    spelled out (a hook, a listener) rather than asked of each in a loop."""
    return task.options.after_succeeded is not None or events.has_listeners("processed")


def succeeded(task: Task[..., object], job: Job, result: object, duration: float) -> None:
    for participant in APPLICATION:
        participant.report_succeeded(task, job, result, duration)


def raised(job: Job, exc: BaseException, will_retry: bool, duration: float) -> None:
    for participant in APPLICATION:
        participant.report_raised(job, exc, will_retry, duration)


def failed(task: Task[..., object] | None, job: Job, exc: BaseException | None) -> None:
    for participant in APPLICATION:
        participant.report_failed(task, job, exc)


def cancelled(task: Task[..., object] | None, job: Job, exc: BaseException) -> None:
    for participant in APPLICATION:
        participant.report_cancelled(task, job, exc)
