"""Slot mode: a worker child runs its ``async def`` tasks at once on an event loop.

A child starts in process mode (one sync task at a time, under SIGALRM). The first
``async def`` task it meets makes its event loop (after fork, so none is shared) and
switches its scoreboard slot to ``CONCURRENT``: from then on each entry says whether
its task is unstarted, running or done, and the slot's deadline is the earliest kill
deadline of the running ones (scoreboard.py). While any coroutine runs, the child
keeps the loop fed: whenever fewer than ``--slots`` tasks are unfinished it reserves
another batch (up to the free slots), starts its async tasks as coroutines and runs
its sync ones inline as in process mode (the loop waits meanwhile), then lets the
loop run. Once none is left it sends its acks and goes back to process mode.

Each coroutine runs in its own context (``current_job()`` is its own job). One
watchdog per loop, a callback every ``_WATCH_EVERY`` seconds, cancels the coroutines
past their deadlines: an overrun cancels that coroutine alone and is reported as
``TaskTimeout``, up to that period late. A coroutine that blocks the loop
(``time.sleep`` in an ``async def``) cannot be cancelled: the parent kills the child at
the slot's deadline and recovery settles every entry. Middleware are sync code: a
stack runs in a thread of its own, whose ``call_next()`` runs the coroutine on the
loop and waits for it.

Outcomes (acks, retries, failures), hooks and listeners run on the loop's thread,
with the same code as process mode; their Redis calls block the loop briefly.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from setproctitle import setproctitle

from rqueue.current import set_current_job
from rqueue.errors import TaskTimeout
from rqueue.middleware.base import Middleware, run_through
from rqueue.payload import Job
from rqueue.store.queue import RedisQueue
from rqueue.task import Task
from rqueue.worker import unique_locks
from rqueue.worker.options import WorkerOptions
from rqueue.worker.reservations import Batch, Batches
from rqueue.worker.scoreboard import Slot
from rqueue.worker.timeouts import TimeLimit
from rqueue.workflows import effects

Attempt = tuple[
    int,
    str,
    bytes,
    Job,
    "Task[..., object] | None",
    tuple[object, ...],
    "Sequence[Middleware] | None",
    int,
    bool,
]
"""One attempt as slot mode carries it: (entry, queue, payload, job, task, args, stack,
tries, workflow); a tuple, made only for async tasks and failures."""


class Child(Protocol):
    """What slot mode uses of its ``ChildWorker`` (child.py, which imports this module):
    the process-mode code for everything but running the coroutine."""

    slot: Slot
    options: WorkerOptions
    queue: RedisQueue
    batches: Batches
    number: int
    time_limit: TimeLimit
    _title: str

    def _persist(self, call: Callable[[], T]) -> T: ...
    def _should_exit(self) -> bool: ...
    def _claim(
        self, most: int
    ) -> tuple[int, Batch | None, list[tuple[str, int, int]], Sequence[int]]: ...
    def _run_batch(
        self, batch: Batch, headers: list[tuple[str, int, int]], entries: Sequence[int]
    ) -> None: ...
    def _completion(
        self, job: Job, payload: bytes, result: object, started: float
    ) -> effects.Completion | None: ...
    def _attempt_failed(
        self, attempt: Attempt, exc: BaseException, duration: float, expires_at: float
    ) -> None: ...
    def _succeeded(
        self,
        index: int,
        queue: str,
        payload: bytes,
        job: Job,
        task: Task[..., object],
        tries: int,
        result: object,
        completion: effects.Completion | None,
        duration: float,
        expires_at: float,
    ) -> None: ...


log = logging.getLogger("rqueue.worker")

T = TypeVar("T")

_POLL = 0.05
"""Seconds between reserve calls while coroutines run and the queues had nothing: an
idle child blocks on a push instead, but a busy one must keep its loop running."""
_FULL_WAIT = 0.2
"""Longest the loop runs, with every slot taken, before the child looks at signals."""
_WATCH_EVERY = 0.05
"""Seconds between the watchdog's rounds: how late past its deadline a coroutine may be
cancelled. One periodic callback costs far less than a timer per coroutine."""


class SlotRunner:
    """One child's event loop and the coroutines running on it."""

    def __init__(self, child: Child) -> None:
        self.child = child
        self.slot = child.slot
        self.loop = asyncio.new_event_loop()
        self.tasks: dict[int, asyncio.Task[None]] = {}
        """The running attempts by entry: each takes itself out as it ends (no callback)."""
        self._threads: ThreadPoolExecutor | None = None
        self._deadlines: dict[asyncio.Task[Any], float] = {}
        """The running coroutines' deadlines (monotonic), by the asyncio task awaiting
        them: the attempt's own, or the one ``call_next()`` started (middleware)."""
        self._overdue: set[asyncio.Task[Any]] = set()
        """Those the watchdog cancelled: their ``CancelledError`` is a ``TaskTimeout``."""
        self._watchdog: asyncio.TimerHandle | None = None

    def start(self, attempt: Attempt, started: float, timeout: float, expires_at: float) -> None:
        """Start an attempt whose entry the slot already marks running (child.py)."""
        if not self.slot.concurrent:
            self.slot.enter_concurrent()
        self.slot.live_async.add(attempt[0])
        task = self.loop.create_task(self._attempt(attempt, started, timeout, expires_at))
        self.tasks[attempt[0]] = task

    def step(self) -> None:
        """One turn of the child's loop in slot mode."""
        child, slot, options = self.child, self.slot, self.child.options
        if not self.tasks:
            child._persist(child.batches.flush)  # finished entries leave the slot next
            slot.leave_concurrent()
            return
        if child.batches.acks_due_by(time.monotonic() + options.kill_grace):
            child._persist(child.batches.flush)
        free = options.slots - slot.running()
        if free > 0 and not slot.board.paused and not child._should_exit():
            if child.batches.acks_pending() and slot.free() < options.batch_limit:
                child._persist(child.batches.flush)
            if not child.batches.acks_pending():
                slot.recycle_done()
            _, batch, headers, entries = child._claim(min(free, slot.free()))
            if batch is not None:
                child._run_batch(batch, headers, entries)
                child.time_limit.stop()
                # One title per batch: setting it is a system call, too dear per coroutine.
                setproctitle(f"{child._title}: running {len(self.tasks)} async tasks")
                self._run(0.0)  # let the new coroutines take their first step
                return
        self._run(_POLL if free > 0 else _FULL_WAIT)

    def drain(self) -> None:
        """A warm stop: let every running coroutine finish, then leave slot mode."""
        while self.tasks:
            self._run(_FULL_WAIT)
        if self.slot.concurrent:
            self.step()

    def _run(self, seconds: float) -> None:
        """Run the loop until a coroutine finishes or ``seconds`` pass (0: one turn)."""
        if seconds <= 0 or not self.tasks:
            self.loop.run_until_complete(asyncio.sleep(0))
            return
        running = self.tasks.values()
        waiting = asyncio.wait(running, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        self.loop.run_until_complete(waiting)

    async def _attempt(
        self, attempt: Attempt, started: float, timeout: float, expires_at: float
    ) -> None:
        index, queue, payload, job, task, args, stack, tries, _ = attempt
        assert task is not None  # looked up before the attempt came here
        child = self.child
        set_current_job(job)  # this coroutine's own context: it sees its own job
        deadline = started + timeout  # loop.time() is the monotonic clock
        try:
            try:

                def coroutine() -> Awaitable[Any]:
                    call: Awaitable[Any] = task.fn(*args, **job.kwargs)  # type: ignore[assignment]
                    return self._timed(call, deadline, timeout)

                if stack:
                    result = await self._through(queue, stack, job, coroutine)
                else:
                    if job.meta:
                        unique_locks.on_start(child.queue, child._persist, queue, job)
                    result = await coroutine()
                completion = child._completion(job, payload, result, started) if job.meta else None
            except BaseException as exc:  # as in process mode: user code raised it
                child._attempt_failed(attempt, exc, time.monotonic() - started, expires_at)
                return
            duration = time.monotonic() - started
            child._succeeded(
                index, queue, payload, job, task, tries, result, completion, duration, expires_at
            )
        except Exception:  # reporting the outcome failed: the entry is done all the same
            log.exception("worker %d: unexpected error settling %s", child.number, job.id)
        finally:
            self.slot.finished(index)
            del self.tasks[index]

    async def _through(
        self,
        queue: str,
        stack: Sequence[Middleware],
        job: Job,
        coroutine: Callable[[], Awaitable[Any]],
    ) -> Any:
        """Run the middleware stack in a thread: its code never blocks the loop, and its
        ``call_next()`` waits for the coroutine, so it sees its outcome (exceptions, a
        lock's ``finally``) as it would a sync task's."""
        child, loop = self.child, self.loop

        def call() -> Any:
            if job.meta:
                unique_locks.on_start(child.queue, child._persist, queue, job)
            return asyncio.run_coroutine_threadsafe(coroutine(), loop).result()  # type: ignore[arg-type]

        if self._threads is None:
            self._threads = ThreadPoolExecutor(child.options.slots, "rqueue-middleware")
        context = contextvars.copy_context()  # current_job() in the thread is this job
        return await loop.run_in_executor(self._threads, context.run, run_through, stack, job, call)

    async def _timed(self, coroutine: Awaitable[Any], deadline: float, timeout: float) -> Any:
        """Await ``coroutine``; the watchdog cancels it once ``deadline`` (monotonic)
        passes, and that cancellation is raised as ``TaskTimeout``.

        A ``TimeoutError`` the task raises itself stays its own.
        """
        running = asyncio.current_task()
        assert running is not None  # a coroutine runs in a task
        self._deadlines[running] = deadline
        if self._watchdog is None:
            self._watchdog = self.loop.call_later(_WATCH_EVERY, self._watch)
        try:
            return await coroutine
        except asyncio.CancelledError:
            if running in self._overdue:
                raise TaskTimeout(f"task timed out after {timeout:g} s") from None
            raise
        finally:
            del self._deadlines[running]
            self._overdue.discard(running)

    def _watch(self) -> None:
        """The watchdog: cancel each coroutine past its deadline, then come again while
        any runs (the loop only calls it while it runs, as it would a timer)."""
        now = self.loop.time()  # the monotonic clock
        for running, deadline in self._deadlines.items():
            if deadline <= now and running not in self._overdue:
                self._overdue.add(running)
                running.cancel()
        self._watchdog = None
        if self._deadlines:
            self._watchdog = self.loop.call_later(_WATCH_EVERY, self._watch)
