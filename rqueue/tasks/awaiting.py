"""Awaiting what an ``async def`` hook or listener returns, from sync code.

Hooks and listeners are called by sync code (worker/outcomes.py, events.py), which
may itself run in one of two places, and what it may do with a coroutine differs:

- **No event loop runs in this thread** (a worker child in process mode): the
  coroutine runs to its end right there, as a sync hook would, on this process's one
  loop (:func:`process_loop`, made on first use), by one thread at a time
  (``--threads``). ``asyncio.run()`` per call would make and tear down a loop each
  time, and async mode's tasks share this loop too, so a child never has two.
- **A loop runs in this thread** (async mode: the outcome of an ``async def`` task is
  reported from its coroutine): blocking would stall every other coroutine, so the
  coroutine is scheduled as a task on that loop and kept in a set until it ends (a
  loop holds its tasks only weakly). :func:`settle` waits for them before the loop
  stops being run (async mode leaving, a warm stop).

Either way whatever it raises (``SystemExit`` too) is logged with the caller's message,
never passed on: a hook or listener cannot change a task's outcome or end a worker.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import threading
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("rqueue.awaiting")

_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0
"""The process whose loop ``_loop`` is: a forked child must not run its parent's (the
selector and its wake-up pipe are shared with it), so it makes its own."""

_scheduled: set[asyncio.Task[None]] = set()
"""Coroutines scheduled on a running loop and not yet ended: their strong references."""

_turn = threading.Lock()
"""Held by the thread running the process loop for one coroutine (:func:`_on_loop`).
Runs share the process, not one another: with ``--threads`` two tasks' async hooks
finish at once, and a coroutine handed to a loop that another thread runs only until
its own coroutine ends was never run, its thread waiting for ever."""
_making = threading.Lock()


def process_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for async hooks and listeners, and async mode's."""
    global _loop, _loop_pid
    with _making:  # two threads at once make one loop
        if _loop is None or _loop_pid != os.getpid():
            _loop, _loop_pid = asyncio.new_event_loop(), os.getpid()
        return _loop


def _on_loop(awaitable: Awaitable[object]) -> object:
    """Run ``awaitable`` to its end on the process loop, from a thread where no loop
    runs: on it, when no other thread runs it (one at a time: :data:`_turn`), else
    handed to the thread that runs it (async mode's), and waited for."""
    loop = process_loop()
    with _turn:
        if not loop.is_running():
            return loop.run_until_complete(_awaited(awaitable))
    return asyncio.run_coroutine_threadsafe(_awaited(awaitable), loop).result()


def finish(
    awaitable: Awaitable[object], logger: logging.Logger, message: str, *args: object
) -> None:
    """Run ``awaitable`` to its end, or schedule it if a loop runs in this thread; what
    it raises is logged as ``logger.exception(message, *args)``."""
    logged = _logged(awaitable, logger, message, args)
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:
        scheduled = running.create_task(logged)
        _scheduled.add(scheduled)
        scheduled.add_done_callback(_scheduled.discard)
        return
    _on_loop(logged)


def resolved(value: object) -> object:
    """``value``, or what it resolves to if it is awaitable (an ``async def`` task run
    inline by rqueue.testing): run to its end on this process's loop, or, when a loop
    already runs in this thread (an async test dispatching under ``sync()``), on a loop
    of its own in another thread, which this one waits for, in this one's context."""
    if not inspect.isawaitable(value):
        return value
    if not _loop_running():  # outside an except: what the task raises has no context
        return _on_loop(value)
    context = contextvars.copy_context()  # current_job() there is the job run here
    with ThreadPoolExecutor(1, "rqueue-inline") as thread:
        return thread.submit(context.run, asyncio.run, _awaited(value)).result()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _awaited(awaitable: Awaitable[object]) -> object:
    return await awaitable


def settle(loop: asyncio.AbstractEventLoop, timeout: float) -> None:
    """Run ``loop`` (not running) until the coroutines scheduled on it have ended, for
    at most ``timeout`` seconds; those still running then are cancelled, and logged so."""
    pending = {task for task in _scheduled if task.get_loop() is loop}
    if not pending:
        return
    _, late = loop.run_until_complete(asyncio.wait(pending, timeout=timeout))
    if late:
        log.error(
            "%d async hook(s) or listener(s) still running after %g s: cancelled",
            len(late),
            timeout,
        )
        for task in late:
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))  # each logs its CancelledError


async def _logged(
    awaitable: Awaitable[object], logger: logging.Logger, message: str, args: tuple[object, ...]
) -> None:
    try:
        await awaitable
    except BaseException:  # as a sync hook's: logged, never the worker's end
        logger.exception(message, *args)
