"""Thread mode's way back to the event loop: sync tasks' ends, handed over in bunches.

``asyncio.wrap_future`` wakes the loop once per finished thread: a write to its
self-pipe, and the GIL passed to the loop's thread and back, for every task. A child
with ``--threads 100`` finishing thousands of tasks a second spent more CPU on that
than on its Redis calls. Here a thread that finishes adds its future to a list, and
only the first to do so since the loop last looked wakes it; the loop then settles
every future on the list in one turn.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any


class Handoff:
    """Awaitable ends of the futures of one loop's threads."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._ended: list[tuple[asyncio.Future[Any], Future[Any]]] = []
        self._woken = False
        """The loop was asked to look at ``_ended`` and has not yet."""

    def awaiting(self, running: Future[Any]) -> asyncio.Future[Any]:
        """An asyncio future that ends as ``running`` does, as ``wrap_future``'s: with its
        result or exception; cancelling it cancels ``running`` (if it has not started)."""
        waiter = self.loop.create_future()

        def cancelled(waiter: asyncio.Future[Any]) -> None:
            if waiter.cancelled():
                running.cancel()

        waiter.add_done_callback(cancelled)
        running.add_done_callback(lambda ended: self._hand_over(waiter, ended))
        return waiter

    def _hand_over(self, waiter: asyncio.Future[Any], ended: Future[Any]) -> None:
        """In the thread that finished: list it, and wake the loop unless it is woken."""
        with self._lock:
            self._ended.append((waiter, ended))
            if self._woken:
                return
            self._woken = True
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        """On the loop: end every waiter whose future ended since the last look."""
        with self._lock:
            ended, self._ended = self._ended, []
            self._woken = False
        for waiter, running in ended:
            if waiter.done():  # cancelled meanwhile (a timeout)
                continue
            if running.cancelled():
                waiter.cancel()
            elif (exc := running.exception()) is not None:
                waiter.set_exception(exc)
            else:
                waiter.set_result(running.result())
