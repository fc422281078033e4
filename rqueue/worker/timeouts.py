"""The per-task time limit: SIGALRM raises :class:`TaskTimeout` inside the task.

This is the soft limit: the task can clean up, and it is retried or failed like any
error. A task that swallows the exception or is stuck in C code is killed by the
parent (see ``supervisor.py``) once ``kill_grace`` more seconds have passed.

A cancel is delivered the same way (:meth:`TimeLimit.interrupt`, from the child's
SIGUSR1 handler): ``TaskCancelled`` is raised inside the task while it is armed,
never once it has returned.
"""

from __future__ import annotations

import math
import signal
import time
from types import FrameType

from rqueue.encoding.payload import Job
from rqueue.errors import TaskCancelled, TaskTimeout

_EARLY = 0.0005
"""Seconds before a deadline at which a firing timer counts as on time (clock rounding)."""


class TimeLimit:
    """Installed once per child; armed around each task.

    Setting the interval timer is a system call, and a busy child starts thousands of
    tasks a second, so the timer is only set when it would otherwise fire too late.
    When it fires early (for an earlier task's deadline), the handler sets it again
    for what is left of the running task's time. Either way the task is interrupted
    at its own deadline and never before.
    """

    def __init__(self) -> None:
        self._seconds = 0.0
        self._deadline: float | None = None  # the running task's, on the monotonic clock
        self._fires_at = math.inf
        signal.signal(signal.SIGALRM, self._expired)

    def arm(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        self._seconds, self._deadline = seconds, deadline
        if self._fires_at > deadline:
            signal.setitimer(signal.ITIMER_REAL, seconds)
            self._fires_at = deadline

    def disarm(self) -> None:
        """Called in a ``finally`` right after the task: no context manager on the hot path.

        Only the deadline is cleared: a timer that still fires finds no task and is
        ignored. :meth:`stop` really cancels the timer once a batch is done.
        """
        self._deadline = None

    def stop(self) -> None:
        self._deadline = None
        self._fires_at = math.inf
        signal.setitimer(signal.ITIMER_REAL, 0)

    def interrupt(self, job: Job) -> None:
        """Stop ``job``'s run for its cancel: mark it cancelled and raise
        ``TaskCancelled`` in it, if a task runs under this limit now (between
        :meth:`arm` and :meth:`disarm`); else nothing, and the parent asks again."""
        if self._deadline is None:
            return
        self._deadline = None  # its timeout no longer fires: it is stopping
        job.request_cancel()
        raise TaskCancelled(f"task {job.id} was cancelled while it ran")

    def _expired(self, signum: int, frame: FrameType | None) -> None:
        deadline = self._deadline
        if deadline is None:
            self._fires_at = math.inf
            return
        left = deadline - time.monotonic()
        if left > _EARLY:
            signal.setitimer(signal.ITIMER_REAL, left)
            self._fires_at = deadline
            return
        self._deadline = None
        raise TaskTimeout(f"task timed out after {self._seconds:g} s")
