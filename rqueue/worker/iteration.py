"""An iterable task's part in a worker child: its checkpoints kept in Redis, its time
limit re-armed at each, and a warm shutdown seen at its next item boundary.

``tasks/iterable.py`` drives the task's generator; it asks the context's keeper,
which a child sets once as it starts (:class:`ChildCheckpoints`), to read, keep and
finish checkpoints (``store/checkpoints.py``, checkpoint.lua). Nothing here runs
for a plain task: the driver is what a worker calls for an iterable task only.

**A timeout bounds one stretch of items, not the task.** Each checkpoint (at most
``CHECKPOINT_EVERY`` seconds apart, half the timeout if that is shorter) starts the
task's time limit again: in process mode SIGALRM's :class:`TimeLimit`, in async and
thread modes the concurrent runner's deadline (``ConcurrentRunner.extend``), and
in every mode the kill deadline the parent reads in the scoreboard and the task's
reservation in Redis (renewed by the same script that keeps the checkpoint). So a
task may run for hours while each item, and each stretch between two checkpoints,
stays bounded by its timeout.

:class:`ForgetCheckpoint` is the participant that deletes an iterable task's
checkpoint once it failed for good (in the child, or in the parent settling a dead
child's task). A success keeps its last checkpoint only as long as its reservation
could still come back (its acknowledgement rides on the next reserve call: a child
killed before sending it leaves the task to run again, and it then resumes at its
end instead of its start), after which it expires.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from rqueue.encoding.payload import Job
from rqueue.errors import CheckpointRefused
from rqueue.store import checkpoints
from rqueue.store.checkpoints import Checkpoint
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import Persist
from rqueue.tasks.current import Run
from rqueue.tasks.iterable import CHECKPOINT_EVERY, ITERABLE
from rqueue.worker.attempt import Attempt, Participant
from rqueue.worker.options import WorkerOptions
from rqueue.worker.scoreboard import Slot, State
from rqueue.worker.timeouts import TimeLimit


class Extending(Protocol):
    """What a checkpoint uses of the child's concurrent runner (``concurrent.py``,
    which imports this module's importers): its loop, and restarting a task's clock."""

    loop: asyncio.AbstractEventLoop

    def extend(self, attempt: Attempt, running: asyncio.Task[Any] | None) -> None: ...


def is_iterable(job: Job) -> bool:
    """Whether the call is an iterable task's (it may have a checkpoint to forget)."""
    return job.meta.get(ITERABLE) is not None


class ChildCheckpoints:
    """A worker child's keeper of its iterable tasks' checkpoints (``tasks.iterable.Keeper``).

    ``stopping`` says whether a warm shutdown began; ``time_limit`` and ``concurrent``
    give the child's SIGALRM limit and its concurrent runner (None until it has one).
    """

    def __init__(
        self,
        store: RedisQueue,
        options: WorkerOptions,
        slot: Slot,
        stopping: Callable[[], bool],
        time_limit: Callable[[], TimeLimit],
        concurrent: Callable[[], Extending | None],
    ) -> None:
        self.store = store
        self.options = options
        self.slot = slot
        self.stopping = stopping
        self._time_limit = time_limit
        self._concurrent = concurrent

    def drives(self, run: Run, driver: Callable[..., Any]) -> bool:
        task = run.task if isinstance(run, Attempt) else None
        return task is not None and task.fn is driver

    def resume(self, run: Run) -> Checkpoint | None:
        attempt = _attempt(run)
        return checkpoints.read(self.store, attempt.queue, attempt.job.id)

    def every(self, run: Run) -> float:
        return min(CHECKPOINT_EVERY, _attempt(run).timeout / 2)

    def save(self, run: Run, checkpoint: Checkpoint, rearm: bool) -> None:
        """Keep it while the task is still ours; with ``rearm``, its time limit, kill
        deadline and reservation start again (the clock first: a SIGALRM due now must
        not cut the write short)."""
        attempt = _attempt(run)
        options = self.options
        lasting = options.reservation_margin + attempt.timeout + options.kill_grace
        sent = time.monotonic()
        if rearm:
            self._restart_clock(attempt)
        kept = checkpoints.write(
            self.store,
            attempt.queue,
            attempt.job.id,
            checkpoints.encode(checkpoint),
            checkpoints.KEEP_MS,
            attempt.payload,
            round(lasting * 1000) if rearm else 0,
        )
        if not kept:
            attempt.lost = True
            raise CheckpointRefused(
                f"task {attempt.job.id!r}'s checkpoint was refused: this worker no longer "
                "holds it (its reservation ran out, or it was settled), so it stops here"
            )
        if rearm:
            attempt.expires_at = sent + lasting

    def finish(self, run: Run, checkpoint: Checkpoint) -> None:
        """The generator returned: keep the last checkpoint for as long as its
        reservation could still come back (a lost acknowledgement), then let it expire.
        (Forgetting it now would make a run its lost acknowledgement repeats start
        over from the first item.)"""
        attempt = _attempt(run)
        options = self.options
        self._restart_clock(attempt)  # no timeout may cut the last write short
        window = options.reservation_margin + attempt.timeout + options.kill_grace
        keep_ms = round((window + max(0.0, attempt.expires_at - time.monotonic())) * 1000)
        encoded = checkpoints.encode(checkpoint)
        job = attempt.job
        checkpoints.write(self.store, attempt.queue, job.id, encoded, keep_ms, attempt.payload, 0)

    def _restart_clock(self, attempt: Attempt) -> None:
        """Start the attempt's time limit again, however its mode runs it."""
        runner = self._concurrent()
        if threading.current_thread() is not threading.main_thread():
            assert runner is not None  # a thread of --threads: the runner owns its clock
            runner.loop.call_soon_threadsafe(runner.extend, attempt, None)
            return
        running = _running_task()
        if running is not None and runner is not None:  # a coroutine on the child's loop
            runner.extend(attempt, running)
            return
        self._time_limit().arm(attempt.timeout)  # process mode: SIGALRM
        deadline = time.monotonic() + attempt.timeout + self.options.kill_grace
        self.slot.set(State.RUNNING, attempt.entry, deadline)


class ForgetCheckpoint(Participant):
    """Deletes an iterable task's checkpoint once it failed for good or was cancelled:
    no later run may resume from it (a retry from the failed list starts over)."""

    __slots__ = ("persist", "store")

    def __init__(self, store: RedisQueue, persist: Persist) -> None:
        self.store = store
        self.persist = persist

    def after_failed(self, queue: str, job: Job | None, duration: float | None) -> None:
        if job is not None:
            self._forget(queue, job)

    def after_cancelled(self, queue: str, job: Job, duration: float | None) -> None:
        self._forget(queue, job)

    def _forget(self, queue: str, job: Job) -> None:
        store = self.store
        self.persist(lambda: checkpoints.forget(store, queue, job.id))


def _attempt(run: Run) -> Attempt:
    assert isinstance(run, Attempt)  # a worker child's runs are its attempts
    return run


def _running_task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no loop runs in this thread
        return None
