"""The concurrent runner's watchdog: the deadlines of the coroutines on a child's loop,
and the parent's cancels reaching them.

One callback every ``_WATCH_EVERY`` seconds, not a timer per coroutine, cancels each
coroutine past its deadline (an overrun cancels that coroutine alone and is reported as
``TaskTimeout``, up to that period late) and times out each thread's attempt past its
own (threaded.py). A coroutine that blocks the loop (``time.sleep`` in an ``async
def``) cannot be cancelled: the parent kills the child at the slot's deadline and
recovery settles every entry.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

from rqueue.errors import TaskCancelled, TaskTimeout
from rqueue.worker.attempt import Attempt
from rqueue.worker.scoreboard import Slot, State
from rqueue.worker.threaded import ThreadedAttempts

_WATCH_EVERY = 0.05
"""Seconds between the watchdog's rounds: how late past its deadline a coroutine may be
cancelled. One periodic callback costs far less than a timer per coroutine."""


class Watchdog:
    """The running coroutines' deadlines on one loop, and the round that enforces them
    and the threads' (``threaded``)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        slot: Slot,
        kill_grace: float,
        threaded: ThreadedAttempts,
    ) -> None:
        self.loop = loop
        self.slot = slot
        self.kill_grace = kill_grace
        self.threaded = threaded
        self._deadlines: dict[asyncio.Task[Any], tuple[float, Attempt]] = {}
        """The running coroutines' deadlines (monotonic) and attempts, by the asyncio task
        awaiting them: the attempt's own, or the one ``call_next()`` started (middleware)."""
        self._overdue: set[asyncio.Task[Any]] = set()
        """Those the watchdog cancelled: their ``CancelledError`` is a ``TaskTimeout``."""
        self._round: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        """Make sure a round comes (one is pending while anything runs)."""
        if self._round is None:
            self._round = self.loop.call_later(_WATCH_EVERY, self._watch)

    async def timed(self, coroutine: Awaitable[Any], attempt: Attempt) -> Any:
        """Await ``coroutine``; the watchdog cancels it once the attempt's deadline
        (monotonic: loop.time()'s clock) passes, and that cancellation is raised as
        ``TaskTimeout``; one for the attempt's cancel (:meth:`deliver_cancels`), as
        ``TaskCancelled``.

        A ``TimeoutError`` the task raises itself stays its own.
        """
        running = asyncio.current_task()
        assert running is not None  # a coroutine runs in a task
        self._deadlines[running] = (attempt.started + attempt.timeout, attempt)
        self.arm()
        try:
            return await coroutine
        except asyncio.CancelledError:
            if running in self._overdue:
                raise TaskTimeout(f"task timed out after {attempt.timeout:g} s") from None
            if attempt.job.cancelled:
                raise TaskCancelled(f"task {attempt.job.id} was cancelled while it ran") from None
            raise
        finally:
            del self._deadlines[running]
            self._overdue.discard(running)

    def extend(self, attempt: Attempt, running: asyncio.Task[Any]) -> None:
        """The coroutine ``running`` awaits checkpointed: its time limit starts again, its
        kill deadline with it; nothing if it ended meanwhile."""
        if running not in self._deadlines:
            return
        deadline = time.monotonic() + attempt.timeout
        self._deadlines[running] = (deadline, attempt)
        self.slot.set(State.RUNNING, attempt.entry, deadline + self.kill_grace)

    def _watch(self) -> None:
        """A round: cancel each coroutine past its deadline, time out each thread's
        attempt past its own, then come again while any runs (the loop only calls it
        while it runs, as it would a timer)."""
        now = self.loop.time()  # the monotonic clock
        for running, (deadline, _) in self._deadlines.items():
            if deadline <= now and running not in self._overdue:
                self._overdue.add(running)
                running.cancel()
        self.threaded.watch(now)
        self._round = None
        if self._deadlines or self.threaded.running:
            self.arm()

    def deliver_cancels(self) -> None:
        """The parent asked for cancels (SIGUSR1: the child's handler calls this, so the
        loop is woken to deliver them). Each running attempt whose entry the parent
        named with its id is marked cancelled (``current_job().cancelled``); an ``async
        def`` one's coroutine is cancelled too, and ends as ``TaskCancelled``. A thread
        cannot be stopped: it stops at its next ``check_cancelled()``, or its child is
        killed ``--kill-grace`` seconds later (the parent's watch, ``cancels.py``)."""
        self.loop.call_soon_threadsafe(self._deliver_cancels)

    def _deliver_cancels(self) -> None:
        for running, (_, attempt) in list(self._deadlines.items()):
            job = attempt.job
            if job.cancelled or self.slot.cancel_requested(attempt.entry) != job.id:
                continue
            job.request_cancel()
            running.cancel()
        self.threaded.deliver_cancels()
