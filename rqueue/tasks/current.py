"""The job a worker is running, for task code that needs its id, attempt or schedule.

A context variable rather than an extra argument, so task functions keep the plain
signatures they have when called inline (where there is no current job). It is also
where the state of one run lives (:class:`Run`): a child may run many tasks at once,
in threads (``--threads``) or as coroutines on one event loop (``--slots``), and each
thread and each coroutine has a context of its own, so nothing of one run is ever
seen, or reset, by another. Never a module global.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import NamedTuple

from rqueue.encoding.payload import Job
from rqueue.store.queue import RedisQueue


class Run:
    """One run of a job, and what it counts while it runs."""

    __slots__ = ("_adds", "job")

    def __init__(self, job: Job) -> None:
        self.job = job
        self._adds = 0
        """``Batch.add()`` calls so far: a plain count, made with each run (every task's)."""

    def next_add(self) -> int:
        """The number of this run's next ``Batch.add()`` call (1, 2, ...): a run that
        runs again (a retry, a lost acknowledgement) numbers its calls the same way,
        so each call adds the same members however often it runs."""
        self._adds += 1
        return self._adds

    def reserved_payload(self) -> bytes:
        """The exact bytes a worker reserved for this run, for a middleware that puts
        the call back itself (``Concurrency`` parks it to wait for a slot); b"" where
        nothing is reserved (a task run inline)."""
        return b""


_running: ContextVar[Run | None] = ContextVar("rqueue_current_job", default=None)


class Runner(NamedTuple):
    """What runs the current job: middleware keep their state on its connection, and
    size a lock to outlast a run by its default timeout and kill grace."""

    connection: RedisQueue
    timeout: float
    """Seconds a task without its own timeout may run."""
    kill_grace: float
    batches_heard: dict[str, tuple[bool, float]] | None = None
    """What this worker child last heard of batches' cancellation (batch id ->
    (cancelled, when, monotonic)), shared by its runs: see
    ``workflows.effects.batch_cancelled``. None: nothing is remembered."""


_runner: ContextVar[Runner | None] = ContextVar("rqueue_runner", default=None)


def current_job() -> Job | None:
    """The job being run in this worker child, or None outside a worker."""
    run = _running.get()
    return None if run is None else run.job


def current_run() -> Run | None:
    """The run of :func:`current_job`, or None outside a worker."""
    return _running.get()


def set_current_job(job: Job | None) -> None:
    """Make ``job`` the one running in this context, in a run of its own; setting the
    very job that is running already keeps its run."""
    run = _running.get()
    if job is None:
        _running.set(None)
    elif run is None or run.job is not job:
        _running.set(Run(job))


set_current_run: Callable[[Run], object] = _running.set
"""Make a run the one running in this context: a worker's attempt is its own run
(``worker/attempt.py``), so starting one makes no object of its own. The context
variable's own setter, called for every task: no call of ours around it."""


current_runner: Callable[[], Runner | None] = _runner.get
"""The worker (or ``rqueue.testing.sync()``) running jobs in this process, if any. The
context variable's own getter: a batch member asks it before it runs (``heard.py``)."""


def set_runner(runner: Runner | None) -> None:
    _runner.set(runner)
