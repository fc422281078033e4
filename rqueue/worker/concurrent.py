"""The concurrent runner: a worker child runs many tasks at once, on an event loop.

What it runs is the lifecycle's (lifecycle.py): an attempt is admitted, prepared and
started there, handed here to be awaited (an ``async def`` task on the loop, with
``--slots``; a sync one in a thread, with ``--threads``), and settled there again by
the same methods as in process mode. This module decides only how and when.

A child starts in process mode (one sync task at a time, under SIGALRM). The first
``async def`` task it meets makes its event loop (after fork, so none is shared) and
switches its scoreboard slot to ``CONCURRENT``: from then on each entry says whether
its task is unstarted, running or done, and the slot's deadline is the earliest kill
deadline of the running ones (scoreboard.py). While any coroutine runs, the child
keeps the loop fed: whenever fewer than ``--slots`` tasks are unfinished it reserves
another batch (up to a tenth of the slots per turn, or per millisecond of a slower
turn: see ``step``), starts its async tasks as coroutines and runs its sync ones
inline as in process mode (the loop waits meanwhile) or in threads, sends the call
that reserves a fifth more from a deep queue if its tasks end a few at a time (read
once slots free, as process mode reads ahead: reservations.py), then lets the loop
run; with slots free and the queues empty, the loop waits for a push meanwhile
(``_listen``, ``listener.py``). Once none is left it sends its acks and goes back to
process mode.

Each coroutine runs in its own context (``current_job()`` is its own job). One
watchdog per loop cancels the coroutines past their deadlines (watchdog.py).
Middleware are sync code: a stack runs in a thread of its own, whose ``call_next()``
runs the coroutine on the loop and waits for it.

With ``--threads N`` (thread mode) the child's sync tasks run here too, each in one of
N threads, and are settled as their ends reach the loop, in bunches, with no coroutine
each (threaded.py, threads.py); a thread that overruns is reported as ``TaskTimeout``
and keeps its entry's kill deadline until it ends.

Outcomes (acks, retries, failures), hooks and listeners run on the loop's thread,
through the same lifecycle as process mode; their Redis calls block the loop briefly. An
``async def`` hook or listener is scheduled on the loop (rqueue/tasks/awaiting.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from rqueue.settings.config import Config
from rqueue.tasks import awaiting
from rqueue.tasks.current import set_current_run
from rqueue.worker.attempt import Attempt, call_scopes
from rqueue.worker.lifecycle import Header, Lifecycle
from rqueue.worker.listener import Listener, Woken
from rqueue.worker.options import WorkerOptions
from rqueue.worker.reservations import Reservations
from rqueue.worker.reserved import Reserved
from rqueue.worker.scoreboard import Slot
from rqueue.worker.threaded import ThreadedAttempts
from rqueue.worker.timeouts import TimeLimit
from rqueue.worker.titles import ProcessTitle
from rqueue.worker.watchdog import Watchdog


class ChildLoop(Protocol):
    """What the concurrent runner uses of its worker child (child.py, which imports
    this module): the child's own loop for claiming and starting batches."""

    slot: Slot
    options: WorkerOptions
    reservations: Reservations
    number: int
    config: Config
    title: ProcessTitle
    time_limit: TimeLimit

    def persist(self, call: Callable[[], T]) -> T: ...
    def should_exit(self) -> bool: ...
    def claim(self, most: int) -> tuple[int, Reserved | None, list[Header], Sequence[int]]: ...
    def run_batch(self, batch: Reserved, headers: list[Header], entries: Sequence[int]) -> None: ...
    def read_ahead(self, batch: Reserved, size: int = 0) -> None: ...
    def heard(self, queue: str | None, idle: bool = False) -> None: ...
    def reserves_early(self) -> bool: ...


log = logging.getLogger("rqueue.worker")

T = TypeVar("T")

_POLL = 0.05
"""Seconds between reserve calls while coroutines run and the queues had nothing, when
no thread can wait for a push instead (``--block-for 0``, rate-limited queues)."""
_SPREAD = 10
"""A turn of the loop, or a millisecond of a slower turn, starts at most this fraction of
the slots (see ``ConcurrentRunner.step``)."""
_AHEAD = 5
"""The batch read ahead is this fraction of the tasks a child runs at once (its threads
in thread mode, else its slots): a fifth ran 1.06x the tasks/s of a tenth, and two
fifths no more (--threads 100, tasks that wait 20 ms, medians of 4 alternated runs)."""
_LISTEN_FOR = 0.5
"""Longest wait for a push while coroutines run: a child that leaves the concurrent runner
waits for it to end (a push ends it at once), so this bounds how late a stop is seen then."""
_FULL_WAIT = 0.2
"""Longest the loop runs, with every slot taken, before the child looks at signals."""


def _resolve(future: asyncio.Future[None], *_: object) -> None:
    """End ``future`` unless it ended (a timer's, a push's or an attempt's end, first)."""
    if not future.done():
        future.set_result(None)


def starts_allowed(tenth: int, since: float) -> int:
    """How many tasks a turn of the loop may start, ``since`` seconds after the last
    reserve call: a tenth of the slots, or that many per millisecond if turns are slower."""
    return max(tenth, int(tenth * since * 1000))


class ConcurrentRunner:
    """One child's event loop and the coroutines running on it."""

    def __init__(self, child: ChildLoop, lifecycle: Lifecycle) -> None:
        self.child = child
        self.lifecycle = lifecycle
        self.slot = child.slot
        self.loop = awaiting.process_loop()  # async hooks in process mode use it too
        self.tasks: dict[int, asyncio.Task[None]] = {}
        """The running coroutines by entry: each takes itself out as it ends (no callback)."""
        self._ended: asyncio.Future[None] | None = None
        """What ``_run`` waits for: the first attempt to end resolves it. One future, not
        ``asyncio.wait`` over every running task, which costs a callback added to and
        removed from each of them per turn (47 us a turn at 100 slots)."""
        self._threads: ThreadPoolExecutor | None = None
        """Threads for async tasks' middleware stacks (``_through``)."""
        self.threaded = ThreadedAttempts(
            self.loop,
            child.options.threads,
            self.lifecycle.call,
            self.slot,
            child.options.kill_grace,
            self._settle,
            child.number,
        )
        """Sync tasks running in threads (``--threads``): thread mode (threaded.py)."""
        self.watchdog = Watchdog(self.loop, self.slot, child.options.kill_grace, self.threaded)
        """The running coroutines' and threads' deadlines, and cancels (watchdog.py)."""
        self._tenth = max(1, child.options.slots // _SPREAD)
        options = child.options
        at_once = min(options.slots, options.threads) if options.threads else options.slots
        self._ahead = max(1, at_once // _AHEAD)
        """How many tasks the batch read ahead holds (see ``step``)."""
        self._claimed_at = 0.0
        """When the last reserve call was sent (monotonic): the starts allowed now grow
        with the time since (see ``step``)."""
        self._fresh = False
        """Coroutines were started since the loop last ran: they take a first step before
        the next reserve call, so a task's start waits for no round trip."""
        self._listener: Listener | None = None
        self._wake: Woken | None = None
        """A wait for a push to the queues while slots are free (the loop waits for it
        beside the coroutines), so a free slot takes a new task at once."""

    def start(self, attempt: Attempt) -> None:
        """Start an attempt whose entry the slot already marks running (lifecycle.py)."""
        if not self.slot.concurrent:
            self.slot.enter_concurrent()
            self._claimed_at = time.monotonic()  # the batch that brought it here
        self.slot.live_async.add(attempt.entry)
        assert attempt.task is not None  # looked up before it came here
        if attempt.task.is_async:
            self.tasks[attempt.entry] = self.loop.create_task(self._attempt(attempt))
            self._fresh = True
        else:
            self.threaded.start(attempt)
            self.watchdog.arm()

    def running(self) -> int:
        """Attempts running here: coroutines, and sync tasks in threads."""
        return len(self.tasks) + len(self.threaded.running)

    def make_room(self) -> None:
        """Before a batch's next task: while every slot (in thread mode, every thread) is
        taken, run the loop until one frees, or the child stops (the batch's rest then
        goes back). A batch reserved in process mode was sized by ``--prefetch`` before
        any of its tasks was known to be ``async def``; started whole, it ran more
        coroutines than ``--slots``. A batch read ahead here waits for the tasks that
        run now to end; one reserved here is sized by the free slots already."""
        while self._idle() <= 0 and not self.child.should_exit():
            self._run(_FULL_WAIT)

    def step(self) -> None:
        """One turn of the child's loop while its tasks run concurrently."""
        child, slot, options = self.child, self.slot, self.child.options
        if self._fresh:
            self._run(0.0)
            return
        running = self.running()
        if not running and self.threaded.overran:  # wait for its end, or the parent's kill
            self.loop.run_until_complete(asyncio.sleep(_POLL))
            return
        if not running:
            self._leave()
            return
        if child.reservations.pending.due_by(time.monotonic() + options.kill_grace):
            child.persist(child.reservations.flush)
        free = self.free()
        taking = free > 0 and not slot.board.paused and not child.should_exit()
        if taking:
            if child.reservations.pending and slot.free() < options.batch_limit:
                child.persist(child.reservations.flush)
            if not child.reservations.pending:
                slot.recycle_done()
            # At most a tenth of the slots per turn, or per millisecond since the last
            # reserve call if turns are slower: coroutines started in one instant wait
            # and wake in step, and between such waves the loop sits idle. Spread over
            # turns, their starts stay apart (measured: 1.4x the tasks/s on tasks that
            # all wait 20 ms) for about 0.1 reserve calls per task. Not per turn alone:
            # on a loaded machine a turn took 3-5 ms, and a tenth of the slots per turn
            # left a third of them empty with tasks ready.
            now = time.monotonic()
            most = min(free, slot.free(), starts_allowed(self._tenth, now - self._claimed_at))
            self._claimed_at = now
            _, batch, headers, entries = child.claim(most)
            if batch is not None:
                child.run_batch(batch, headers, entries)
                child.time_limit.stop()
                # Tasks that end a few at a time (fewer free now than the batch read
                # ahead would hold): the next batch is reserved while these run
                # and read once threads or slots free, so the loop's thread waits for
                # no round trip between a task's end and the next one's start (1.2x
                # the tasks/s with --threads 100 on tasks that wait 20 ms). Tasks that
                # end all at once free as many while the call is out: a batch read
                # ahead would start them a few per turn (0.6x the tasks/s of no-op
                # tasks with --threads 10; docs/benchmarks.md).
                if most < self._ahead:
                    child.read_ahead(batch, self._ahead)
                # One title per batch: setting it is a system call, too dear per coroutine.
                child.title.show(f"running {self.running()} tasks")
                self._run(0.0)  # let the new coroutines take their first step
                return
        self._run(self._listen() if taking else _FULL_WAIT)

    def _leave(self) -> None:
        """Nothing runs: send the acks and go back to process mode."""
        child = self.child
        child.persist(child.reservations.flush)  # finished entries leave the slot next
        awaiting.settle(self.loop, child.options.timeout)  # async hooks, listeners end first
        if self._wake is not None:  # it waits for a push as process mode would, its
            assert self._listener is not None  # reserve call behind the wait: read with it
            behind = child.reservations.reserve_behind if child.reserves_early() else None
            self._listener.finish(self._wake, behind)
            self._heard(idle=True)
        self.slot.leave_concurrent()

    def free(self) -> int:
        """How many more tasks may be reserved now: as many as may start (``_idle``),
        less the entries of a batch held unstarted."""
        return min(self.child.options.slots - self.slot.running(), self._idle())

    def _idle(self) -> int:
        """How many more tasks may start now: a free slot for a coroutine, and in thread
        mode a free thread too, whatever the next batch holds; none while a thread that
        overran runs on."""
        options = self.child.options
        idle = options.slots - self.running()
        if options.threads:
            threaded = self.threaded
            idle = 0 if threaded.overran else min(idle, options.threads - len(threaded.running))
        return idle

    def drain(self) -> None:
        """A warm stop: let every running coroutine finish, then go back to process mode."""
        while self.running():
            self._run(_FULL_WAIT)
        if self.slot.concurrent:
            self.step()

    def _run(self, seconds: float) -> None:
        """Run the loop until a coroutine finishes, a push comes or ``seconds`` pass (0:
        one turn)."""
        self._fresh = False
        if seconds <= 0 or not self.running():
            # One turn: each callback ready now runs once (a new coroutine takes its
            # first step). run_until_complete(asyncio.sleep(0)) took two or three, each
            # polling the selector, and a task and a future for the sleep.
            self.loop.call_soon(self.loop.stop)
            self.loop.run_forever()
            return
        # The loop runs until one future ends, which a timer, an attempt's end or a push
        # resolves: ``asyncio.wait`` over them cost a coroutine, an asyncio task and a
        # callback per future at every turn.
        self._ended = ended = self.loop.create_future()
        resolve = functools.partial(_resolve, ended)
        timer = self.loop.call_later(seconds, resolve)
        wake = self._wake
        if wake is not None:
            wake.add_done_callback(resolve)
        try:
            self.loop.run_until_complete(ended)
        finally:
            self._ended = None
            timer.cancel()
            if wake is not None:
                wake.remove_done_callback(resolve)
        if wake is not None and wake.done():
            self._heard()

    def _listen(self) -> float:
        """With slots free and the queues found empty: start a wait for a push (if none
        is on yet: ``listener.py``); return how long the loop may run before the next
        reserve call.

        Rate-limited queues are not waited on (a push there may not be taken yet): they
        are asked again when their limit frees the next task.
        """
        child, options = self.child, self.child.options
        limited = child.reservations.limited
        queues = [name for name in options.queues if name not in limited]
        longest = min(_FULL_WAIT, *limited.values()) if limited else _FULL_WAIT
        if not queues or options.block_for <= 0:
            return min(_POLL, longest)
        if self._wake is None:
            if self._listener is None:
                self._listener = Listener(child.config, self.loop)
            self._wake = self._listener.listen(queues, min(options.block_for, _LISTEN_FOR))
        return longest

    def _heard(self, idle: bool = False) -> None:
        """The wait for a push ended: a push names the queue to reserve from first (at
        once if ``idle``: nothing runs). If it failed (Redis gone), the next reserve call
        meets the same error."""
        wake, self._wake = self._wake, None
        assert wake is not None and wake.done()
        if not wake.cancelled() and wake.exception() is None:
            self.child.heard(wake.result(), idle)

    async def _attempt(self, attempt: Attempt) -> None:
        """Run an ``async def`` attempt to its end and settle it."""
        set_current_run(attempt)  # this coroutine's own context: it sees its own job
        try:
            result = await self._coroutine(attempt)
        except BaseException as exc:  # as in process mode: user code raised it
            self._settle(attempt, None, exc)
        else:
            self._settle(attempt, result, None)
        finally:
            del self.tasks[attempt.entry]

    def _settle(self, attempt: Attempt, result: Any, raised: BaseException | None) -> None:
        """Settle an attempt that returned ``result`` or ``raised``, as process mode does
        (lifecycle.py); its entry is done then, and the child's loop goes on."""
        lifecycle = self.lifecycle
        try:
            completion = None
            if raised is None:
                try:
                    completion = lifecycle.workflow.completion(attempt, result)
                except BaseException as exc:  # its result cannot be kept: it raised
                    raised = exc
            duration = time.monotonic() - attempt.started
            if raised is not None:
                lifecycle.raised(attempt, raised, duration)
            else:
                lifecycle.succeeded(attempt, result, completion, duration)
        except Exception:  # reporting the outcome failed: the entry is done all the same
            log.exception(
                "worker %d: unexpected error settling %s", self.child.number, attempt.job.id
            )
        finally:
            self.slot.finished(attempt.entry)
            if self._ended is not None:
                _resolve(self._ended)  # a slot is free: the child's loop goes on

    async def _coroutine(self, attempt: Attempt) -> Any:
        """Await an ``async def`` task on the loop. Middleware are sync code: a stack
        runs in a thread of its own, whose ``call_next()`` runs the coroutine on the
        loop and waits for it, so it sees its outcome (exceptions, a lock's
        ``finally``) as it would a sync task's, and never blocks the loop."""
        task, job, loop = attempt.task, attempt.job, self.loop
        assert task is not None

        def coroutine() -> Awaitable[Any]:
            call: Awaitable[Any] = task.fn(*attempt.args, **job.kwargs)  # type: ignore[assignment]
            return self.watchdog.timed(call, attempt)

        if not attempt.stack:
            self.lifecycle.before_call(attempt)
            if self.lifecycle.scoping:  # tracing: its span is current in this coroutine
                with call_scopes(attempt):
                    return await coroutine()
            return await coroutine()

        def on_the_loop() -> Any:
            return asyncio.run_coroutine_threadsafe(coroutine(), loop).result()  # type: ignore[arg-type]

        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.child.options.slots, "rqueue-middleware")
        context = contextvars.copy_context()  # current_job() in the thread is this job
        call = functools.partial(self.lifecycle.call, attempt, on_the_loop)
        return await loop.run_in_executor(self._threads, context.run, call)

    def extend(self, attempt: Attempt, running: asyncio.Task[Any] | None) -> None:
        """An iterable task checkpointed (``iteration.py``): its time limit starts again,
        its kill deadline with it. ``running`` is the asyncio task awaiting it (None: a
        thread's, called on the loop). Nothing if it ended meanwhile."""
        if running is None:
            self.threaded.extend(attempt)
        else:
            self.watchdog.extend(attempt, running)

    def deliver_cancels(self) -> None:
        """The parent asked for cancels (SIGUSR1): see ``Watchdog.deliver_cancels``."""
        self.watchdog.deliver_cancels()
