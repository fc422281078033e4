"""Thread mode's attempts (``--threads N``): sync tasks run in the child's threads
(threads.py) and are settled on the loop as their calls end, with no asyncio task each.

An attempt awaited by a coroutine cost the loop's thread, per task, an asyncio task and
its two steps, a future and its callbacks; here the loop settles each call in the bunch
that ``TaskThreads`` hands it, in the attempt's own context (``current_job()`` is its
job there, as it is in the thread). The concurrent runner's watchdog calls :meth:`watch`
on its rounds: an attempt past its deadline is reported as ``TaskTimeout`` at once, and
a thread that runs on keeps its entry's kill deadline until it ends (the parent kills
the child ``--kill-grace`` seconds later if it does not).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from rqueue.errors import TaskTimeout
from rqueue.tasks.current import set_current_run
from rqueue.worker.attempt import Attempt
from rqueue.worker.scoreboard import Slot, State
from rqueue.worker.threads import Call, TaskThreads

log = logging.getLogger("rqueue.worker")

Settle = Callable[[Attempt, Any, BaseException | None], None]
"""The runner's way to settle an attempt: its result, or what it raised."""


class ThreadedAttempts:
    """The sync attempts one child runs in its threads, by entry."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        size: int,
        call: Callable[[Attempt], Any],
        slot: Slot,
        kill_grace: float,
        settle: Settle,
        number: int,
    ) -> None:
        self.pool = TaskThreads(loop, size, "rqueue-task", self._ended)
        self._call = call
        self.slot = slot
        self.kill_grace = kill_grace
        self._settle = settle
        self._number = number
        self.running: dict[int, tuple[Call, float]] = {}
        """Each running attempt's call and deadline (monotonic), by entry."""
        self.overran: dict[int, float] = {}
        """Entries whose thread overran its timeout and runs on, with the kill deadline
        the slot keeps for each until it ends: while any is here, no new task starts."""

    def start(self, attempt: Attempt) -> None:
        """Run it in a thread, its middleware and participants with it (the call process
        mode makes), in a context of its own where ``current_job()`` is its job."""
        context = contextvars.copy_context()
        context.run(set_current_run, attempt)
        call = self.pool.run(self._call, attempt, context)
        self.running[attempt.entry] = (call, attempt.started + attempt.timeout)

    def extend(self, attempt: Attempt) -> None:
        """Its time limit starts again (an iterable task's checkpoint); nothing if it ended."""
        running = self.running.get(attempt.entry)
        if running is None or running[0].arg is not attempt:
            return
        deadline = time.monotonic() + attempt.timeout
        self.running[attempt.entry] = (running[0], deadline)
        self.slot.set(State.RUNNING, attempt.entry, deadline + self.kill_grace)

    def watch(self, now: float) -> None:
        """The watchdog's round: each attempt past its deadline is a ``TaskTimeout``."""
        overdue = [entry for entry, (_, deadline) in self.running.items() if deadline <= now]
        for entry in overdue:
            call, _ = self.running.pop(entry)
            attempt: Attempt = call.arg
            if self.pool.abandon(call, functools.partial(self._thread_ended, entry)):
                self._abandon(entry)
            timeout = TaskTimeout(f"task timed out after {attempt.timeout:g} s")
            # A copy: the thread may still be in the attempt's own context.
            call.context.copy().run(self._settle, attempt, None, timeout)
            if entry in self.overran:  # its thread runs on: the parent's kill deadline stays
                self.slot.linger(entry, self.overran[entry])

    def deliver_cancels(self) -> None:
        """Mark each running attempt whose entry the parent named with its id cancelled
        (``current_job().cancelled``): a thread cannot be stopped, it stops at its next
        ``check_cancelled()`` (or its child is killed: ``cancels.py``)."""
        for entry, (call, _) in self.running.items():
            job = call.arg.job
            if not job.cancelled and self.slot.cancel_requested(entry) == job.id:
                job.request_cancel()

    def _ended(self, call: Call) -> None:
        """On the loop: its call ended (``TaskThreads`` hands over each in the bunch)."""
        attempt: Attempt = call.arg
        del self.running[attempt.entry]
        value, error = (None, call.value) if call.failed else (call.value, None)
        call.context.run(self._settle, attempt, value, error)

    def _abandon(self, entry: int) -> None:
        """A thread overran: keep its entry's kill deadline until it ends."""
        self.overran[entry] = time.monotonic() + self.kill_grace
        log.error(
            "worker %d: a task's thread overran its timeout and cannot be stopped; this "
            "child takes no new task until it ends, and is replaced in %g s if it does not",
            self._number,
            self.kill_grace,
        )

    def _thread_ended(self, entry: int) -> None:
        """An overrunning thread ended after all: its entry needs no kill deadline now."""
        del self.overran[entry]  # its entry lingers (no reuse) until this
        self.slot.finished(entry)
