"""Reporting a running task's progress: ``current_job().progress(0.4, "4 of 10")``.

``Job.progress`` (``encoding/payload.py``) hands each report here, and this module
hands it to the context's *sink*: a worker child sets one that writes to Redis
(``store/progress.py``: one round trip per report), ``rqueue.testing``'s inline
runner one that keeps it in memory, so ``handle.progress()`` answers in tests too.
With no sink (a task's function called directly) a report is checked, then dropped:
reporting progress never fails a task that is not run by a worker.

The sink is a context variable, as the current job is (``tasks/current.py``): each
thread (``--threads``) and coroutine (``--slots``) runs in a copy of its child's
context, so it reports through its child's connection, never a module global.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token

from rqueue.store.progress import checked

Sink = Callable[[str, str, str, int, float, "str | None"], object]
"""Where a checked report goes: ``sink(queue, task_id, task, attempt, fraction, message)``."""

_sink: ContextVar[Sink | None] = ContextVar("rqueue_progress_sink", default=None)


def report(
    queue: str, task_id: str, task: str, attempt: int, fraction: object, message: object
) -> None:
    """Check a report (InvalidProgress names what is wrong), then send it to the sink."""
    checked_fraction, checked_message = checked(fraction, message)
    sink = _sink.get()
    if sink is not None:
        sink(queue, task_id, task, attempt, checked_fraction, checked_message)


def use_sink(sink: Sink | None) -> Token[Sink | None]:
    """Send this context's reports to ``sink`` (None: nowhere); the token resets it."""
    return _sink.set(sink)


def reset_sink(token: Token[Sink | None]) -> None:
    _sink.reset(token)
