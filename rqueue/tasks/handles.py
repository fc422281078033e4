"""Handles on dispatched calls: what ``dispatch()`` returns.

A handle reads the call's status and result from the store (when its task keeps
them) and cancels it; it never talks to the task object or the worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from rqueue.errors import ResultNotKept
from rqueue.store.cancel import CancelOutcome, cancel
from rqueue.store.debounce import Debounced
from rqueue.store.default import default_queue
from rqueue.store.live_events import LiveEvent, task_events
from rqueue.store.progress import Progress
from rqueue.store.progress import read as read_progress
from rqueue.store.results import outcome, read_status, wait_status

if TYPE_CHECKING:
    from rqueue.store.queue import RedisQueue

R = TypeVar("R")


class Dispatched(NamedTuple):
    """A handle on a dispatched task (a named tuple: ``dispatch_many`` makes thousands)."""

    id: str
    task: str
    queue: str
    connection: RedisQueue | None = None
    deduplicated: bool = False
    """True if a unique task's call was not queued: ``id`` is the call already queued
    or running with its key."""
    keeps_result: bool | None = None
    """Whether its task keeps its result (``keep_result``), if the handle came from the
    task (None: only its id is known, as from ``result_of``)."""
    debounced: Debounced | None = None
    """What the dispatch of a debounced task did (``@task(debounce=)``): began a burst,
    or replaced the call pending for its key; ``id`` is the call that will run.
    None for a task without debounce."""

    def __repr__(self) -> str:
        dedup = ", deduplicated=True" if self.deduplicated else ""
        if self.debounced is not None:
            dedup += f", debounced={self.debounced.value!r}"
        return f"Dispatched(id={self.id!r}, task={self.task!r}, queue={self.queue!r}{dedup})"

    def cancel(self, fail: bool = False) -> CancelOutcome:
        """Cancel the task: a pending one at once (``CANCELLED``), a running one by a
        request its worker delivers within a second (``CANCELLING``: it stops, is not
        retried, and its status becomes ``cancelled``); the outcome says which. ``fail``
        files a running task in the failed list too once it stops."""
        return cancel(self.connection or default_queue(), self.id, self.queue, fail)

    def status(self) -> str:
        """pending, delayed, waiting (for the tasks given to ``after=``), running,
        succeeded, failed, cancelled, or unknown (its result was not kept, has expired,
        or no such task was dispatched)."""
        return read_status(self.connection or default_queue(), self.queue, self.id).status

    def progress(self) -> Progress | None:
        """What the task last said of how far it has come (``current_job().progress()``):
        ``(fraction, message, at)``, or None if it said nothing (or a day has passed)."""
        return read_progress(self.connection or default_queue(), self.queue, self.id)

    def events(self, timeout: float = 60.0) -> Iterator[LiveEvent]:
        """Its events as they happen (dispatched, started, progress, retried, succeeded,
        failed, cancelled), from its queue's live event stream (``rqueue work
        --events``), those already there first. Ends after its final event or once
        ``timeout`` seconds have passed: a worker without ``--events`` records none."""
        return task_events(self.connection or default_queue(), self.queue, self.id, timeout)

    def result(self, timeout: float | None = None) -> Any:
        """Wait up to ``timeout`` seconds (None: for ever) for the task's return value.

        TaskFailed if it failed (with the remote exception's type, message and
        traceback), TaskCancelled if it was cancelled, TimeoutError if it has not
        finished in time. ResultNotKept (a TimeoutError) at once if its task keeps no
        result. A handle made from an id alone cannot know that: such a task never
        finishes as far as it can tell (``unknown``, as Celery's ``PENDING``), so give
        a timeout, after which the TimeoutError lists why there may be no result.
        """
        if self.keeps_result is False:
            raise ResultNotKept(
                f"task {self.id} ({self.task}) keeps no result, so result() would wait in "
                "vain: give its task keep_result= (in @task, or .using(keep_result=...) for "
                "this dispatch) to read its status and result"
            )
        queue = self.connection or default_queue()
        status = wait_status(queue, self.queue, self.id, timeout)
        if status.status == "unknown":
            raise TimeoutError(
                f"task {self.id} has no result after {timeout or 0:g} s on queue {self.queue!r}: "
                "its task keeps none (keep_result), its result expired, it was dispatched "
                "to another queue, or not yet (a chain's later step)"
            )
        return outcome(status)

    async def result_async(self, timeout: float | None = None) -> Any:
        """``result()`` for async code: the wait blocks a thread, never the event loop."""
        return await asyncio.to_thread(self.result, timeout)


class TaskHandle(Dispatched, Generic[R]):
    """A :class:`Dispatched` that knows its task's return type (what ``dispatch()`` of a
    ``Task[P, R]`` returns), so ``result()`` is typed ``R`` (an ``async def`` task's: the
    value its coroutine returns)."""

    def result(self, timeout: float | None = None) -> R:
        value: R = super().result(timeout)
        return value

    async def result_async(self, timeout: float | None = None) -> R:
        return await asyncio.to_thread(self.result, timeout)
