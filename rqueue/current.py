"""The job a worker is running, for task code that needs its id, attempt or schedule.

A context variable rather than an extra argument, so task functions keep the plain
signatures they have when called inline (where there is no current job).
"""

from __future__ import annotations

from contextvars import ContextVar

from rqueue.payload import Job

_running: ContextVar[Job | None] = ContextVar("rqueue_current_job", default=None)


def current_job() -> Job | None:
    """The job being run in this worker child, or None outside a worker."""
    return _running.get()


def set_current_job(job: Job | None) -> None:
    _running.set(job)
