"""Thread mode's threads (``--threads N``): sync tasks run in them, and their ends reach
the event loop in bunches.

A ``ThreadPoolExecutor`` awaited through ``asyncio.wrap_future`` costs, per task, a
``concurrent.futures.Future`` (a ``Condition`` and its ``RLock``), a work item, two
locks taken in ``submit``, a ``Semaphore`` of idle threads that the loop and every
thread ending a task queue on, and a wake of the loop per finished thread (a write to
its self-pipe, the GIL passed to the loop's thread and back). With ``--threads 100``
a child spent more CPU on that than on its tasks' own Python, and each time the
loop's thread let the GIL go it waited behind a hundred threads to take it back.

Here a task's run is one small object (``Call``) on a ``SimpleQueue``, which wakes one
waiting thread. A thread that ends a call appends it to a list, and only the first to
do so since the loop last looked wakes the loop, which then hands every call on the
list to the owner's ``ended`` callback in one turn: no future, and no asyncio task
awaiting one, per call. Nothing else is shared between the threads.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(eq=False, slots=True)
class Call:
    """One task's run in a thread: what it calls, in which context, and how it ended
    (written by its thread before it is handed back)."""

    fn: Callable[[Any], Any]
    arg: Any
    context: contextvars.Context
    failed: bool = False
    value: Any = None
    """Its result, or the exception it raised (``failed``)."""
    ended: bool = False
    given_up: bool = False
    """``TaskThreads.abandon`` gave up on it: its end is not handed to ``ended``."""
    on_end: Callable[[], None] | None = None
    """Called on the loop when a call given up on ends."""


class TaskThreads:
    """Up to ``size`` threads of one event loop, started as calls need them; ``ended``
    is called on the loop with each call that ends (unless given up on)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        size: int,
        name: str,
        ended: Callable[[Call], None],
    ) -> None:
        self.loop = loop
        self.ended = ended
        self.size = size
        self.name = name
        self._work: queue.SimpleQueue[Call] = queue.SimpleQueue()
        self._queued: set[Call] = set()
        """Calls no thread has taken yet. A thread takes one, or ``abandon`` withdraws
        it, by removing it from here: one ``set.remove`` under the GIL, so whichever
        comes first wins and the other knows."""
        self._threads = 0
        self._busy = 0
        """Calls handed out and not yet settled on the loop."""
        self._lock = threading.Lock()
        self._ended: list[Call] = []
        self._woken = False
        """The loop was asked to look at ``_ended`` and has not yet."""

    def run(self, fn: Callable[[Any], Any], arg: Any, context: contextvars.Context) -> Call:
        """Call ``fn(arg)`` in a thread, in ``context`` (there, ``current_job()`` is the
        one it holds); once it ends, ``ended`` is called with it on the loop."""
        call = Call(fn, arg, context)
        self._busy += 1
        self._queued.add(call)
        self._work.put(call)
        if self._threads < min(self._busy, self.size):
            name = f"{self.name}_{self._threads}"  # as a ThreadPoolExecutor's: name_0 on
            self._threads += 1
            thread = threading.Thread(target=self._serve, name=name, daemon=True)
            thread.start()  # daemon: a child ends with os._exit, nothing waits for them
        return call

    def abandon(self, call: Call, on_end: Callable[[], None]) -> bool:
        """On the loop: give up on ``call`` (its end is not handed to ``ended``). False
        if it no longer runs (withdrawn before a thread took it, or ended); True if its
        thread runs on, and then ``on_end`` is called on the loop once it ends."""
        call.given_up = True
        try:
            self._queued.remove(call)
        except KeyError:  # a thread took it
            if call.ended:
                return False
            call.on_end = on_end  # before the loop settles it (the loop's own thread)
            return True
        self._busy -= 1
        return False

    def _serve(self) -> None:
        """A thread: take calls, run them, hand them back, for as long as the process lives."""
        take, queued = self._work.get, self._queued
        while True:
            call = take()
            try:
                queued.remove(call)
            except KeyError:  # withdrawn meanwhile
                continue
            try:
                call.value = call.context.run(call.fn, call.arg)
            except BaseException as exc:  # the loop's to judge, as an exception's
                call.failed, call.value = True, _raisable(exc)
            call.ended = True
            self._hand_back(call)
            del call  # holds no task's result while it waits for the next

    def _hand_back(self, call: Call) -> None:
        """In the thread that ended it: list it, and wake the loop unless it is woken."""
        with self._lock:
            self._ended.append(call)
            if self._woken:
                return
            self._woken = True
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        """On the loop: hand over every call that ended since the last look."""
        with self._lock:
            ended, self._ended = self._ended, []
            self._woken = False
        self._busy -= len(ended)
        settle = self.ended
        for call in ended:
            if not call.given_up:
                settle(call)
            elif call.on_end is not None:  # a timeout: its thread ran on until now
                call.on_end()


def _raisable(exc: BaseException) -> BaseException:
    """What a call raising ``exc`` ends with: a ``StopIteration`` becomes the
    ``RuntimeError`` an ``async def`` task raising it ends with (the task's verdict then
    reads the same in either mode)."""
    if isinstance(exc, StopIteration):
        error = RuntimeError("task raised StopIteration")
        error.__cause__ = exc
        return error
    return exc
