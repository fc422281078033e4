"""The job a worker is running, for task code that needs its id, attempt or schedule.

A context variable rather than an extra argument, so task functions keep the plain
signatures they have when called inline (where there is no current job).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import NamedTuple

from rqueue.payload import Job
from rqueue.store.queue import RedisQueue

_running: ContextVar[Job | None] = ContextVar("rqueue_current_job", default=None)


class Runner(NamedTuple):
    """What runs the current job: middleware keep their state on its connection, and
    size a lock to outlast a run by its default timeout and kill grace."""

    connection: RedisQueue
    timeout: float
    """Seconds a task without its own timeout may run."""
    kill_grace: float


_runner: ContextVar[Runner | None] = ContextVar("rqueue_runner", default=None)


def current_job() -> Job | None:
    """The job being run in this worker child, or None outside a worker."""
    return _running.get()


def set_current_job(job: Job | None) -> None:
    _running.set(job)


def current_runner() -> Runner | None:
    """The worker (or ``rqueue.testing.sync()``) running jobs in this process, if any."""
    return _runner.get()


def set_runner(runner: Runner | None) -> None:
    _runner.set(runner)
