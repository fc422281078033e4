"""The per-task time limit: SIGALRM raises :class:`TaskTimeout` inside the task.

This is the soft limit: the task can clean up, and it is retried or failed like any
error. A task that swallows the exception or is stuck in C code is killed by the
parent (see ``supervisor.py``) once ``kill_grace`` more seconds have passed.
"""

from __future__ import annotations

import signal
from types import FrameType

from rqueue.errors import TaskTimeout


class TimeLimit:
    """Installed once per child; armed around each task."""

    def __init__(self) -> None:
        self._armed_for: float | None = None
        signal.signal(signal.SIGALRM, self._expired)

    def arm(self, seconds: float) -> None:
        signal.setitimer(signal.ITIMER_REAL, seconds)  # replaces any earlier timer
        self._armed_for = seconds

    def disarm(self) -> None:
        """Called in a ``finally`` right after the task: no context manager on the hot path.

        Only the flag is cleared, so an alarm that still fires is ignored; the next
        ``arm`` resets the timer. That saves a system call per task; :meth:`stop`
        really cancels the timer once a batch is done.
        """
        self._armed_for = None

    def stop(self) -> None:
        self._armed_for = None
        signal.setitimer(signal.ITIMER_REAL, 0)

    def _expired(self, signum: int, frame: FrameType | None) -> None:
        if self._armed_for is not None:
            seconds, self._armed_for = self._armed_for, None
            raise TaskTimeout(f"task timed out after {seconds:g} s")
