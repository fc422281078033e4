"""The worker child: reserve tasks, run each under its time limit, hand on the outcome.

A child reserves a batch of tasks in one round trip when the queue is deep, runs
them one after another and acknowledges successes together with its next reserve
call, so the hot path costs well under one round trip per task; a success is
settled here, inline, for that reason. Failures are reported at once, by the rules
in ``outcomes.py``. Everything the parent needs to recover the child's tasks if it
dies is kept in its scoreboard slot.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import TypeVar

import redis
from setproctitle import setproctitle

from rqueue import events
from rqueue.encoding.payload import Job, task_name
from rqueue.errors import (
    BatchCancelled,
    InvalidPayload,
    ResultNotStored,
    RQueueError,
    TaskNotRegistered,
    UnregisteredType,
)
from rqueue.events import TaskEvent
from rqueue.metrics.collector import Collector, NoMetrics
from rqueue.middleware.base import Middleware, Release, RetryIn, run_through, stack_of
from rqueue.settings.config import Config
from rqueue.store.default import use
from rqueue.store.header import header
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS, backoff_delay, persist
from rqueue.tasks import registry
from rqueue.tasks.current import Runner, set_current_job, set_runner
from rqueue.tasks.definition import Task
from rqueue.text import shown
from rqueue.worker import (
    parent_failures,  # noqa: F401  (registers the internal report task)
    releases,
    stored,
    unique_locks,
)
from rqueue.worker.admission import admit
from rqueue.worker.interrupts import Interrupted, InterruptibleWaits
from rqueue.worker.logs import log_outcome
from rqueue.worker.options import WorkerOptions
from rqueue.worker.outcomes import Outcomes, forget_exceptions, run_hook
from rqueue.worker.process import memory_exceeded, parent_death_signal
from rqueue.worker.reservations import Batch, Batches
from rqueue.worker.scoreboard import Slot, State
from rqueue.worker.slots import Attempt, SlotRunner, is_async
from rqueue.worker.timeouts import TimeLimit
from rqueue.workflows import effects

log = logging.getLogger("rqueue.worker")

T = TypeVar("T")

HANDLED_SIGNALS = {
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGUSR2,
    signal.SIGCONT,
    signal.SIGCHLD,
}
"""The signals the parent handles; it blocks them across fork() until the child has its own."""
_ACK_SAFETY = 1.0
_NO_HEADER = ("-" * 32, 0, 0)


class ChildWorker(InterruptibleWaits):
    """One forked child of ``rqueue work``."""

    def __init__(
        self,
        options: WorkerOptions,
        config: Config,
        slot: Slot,
        number: int,
        parent_pid: int,
        claims: str,
    ) -> None:
        self.options = options
        self.config = config
        self.slot = slot
        self.number = number
        self.parent_pid = parent_pid
        self.queue = RedisQueue(config)
        self.batches = Batches(self.queue, options, claims)
        self.metrics = Collector(self.queue) if options.metrics else NoMetrics()
        self.outcomes = Outcomes(self.queue, options, slot, self._persist, self.metrics)
        self._limits = stored.Limits(config.max_payload_bytes, config.max_result_bytes)
        self.stop_requested = False
        self.recycle = False
        self._parent_checked_at = 0.0
        self._woken: str | None = None
        """The queue whose push ended the last idle wait: its batch is reserved first."""
        self._slots: SlotRunner | None = None
        """Runs ``async def`` tasks on an event loop, made when the first one comes, and
        with ``--threads`` every sync task in a thread (thread mode)."""
        self._threaded = options.threads > 0
        # Queue names are checked (store/keys.py), and escaped once here all the same.
        self._title = shown(
            f"rqueue: worker {number}/{options.effective_concurrency} {','.join(options.queues)}"
        )

    # -- the loop -----------------------------------------------------------------

    def run(self) -> int:
        use(self.queue)
        set_runner(Runner(self.queue, self.options.timeout, self.options.kill_grace, {}))
        signal.signal(signal.SIGTERM, self._on_stop)
        for ignored in (signal.SIGINT, signal.SIGHUP, signal.SIGUSR2):
            signal.signal(ignored, signal.SIG_IGN)
        # If the parent dies, the kernel sends us SIGTERM at once (a warm stop): no
        # orphan keeps taking tasks unsupervised, and no per-task getppid() is needed.
        parent_death_signal(signal.SIGTERM)
        if os.getppid() != self.parent_pid:
            self.stop_requested = True  # it died before we asked
        # The parent blocked signals across fork(); ours are installed, so let them in.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)
        self.time_limit = TimeLimit()
        failures = 0
        while not self._should_exit():
            try:
                self._step()
                failures = 0
            except Interrupted:
                continue
            except REDIS_ERRORS as exc:
                failures += 1
                self._backoff(failures, exc)
            except Exception:
                failures += 1
                log.exception("worker %d: unexpected error; backing off", self.number)
                self._backoff(failures, None)
        if self._slots is not None:  # a warm stop lets running coroutines finish
            self._slots.drain()
        self._give_back_read_ahead()
        self._persist(self.batches.flush)
        self._fail_refused()
        self.metrics.flush()
        self.slot.set(State.WAITING)
        return 0

    def _fail_refused(self) -> None:
        """Fail, each alone, the successes whose acknowledgement Redis refused."""
        refused = self.batches.refused
        while refused:
            self.outcomes.ack_refused(*refused[0])
            del refused[0]

    def _should_exit(self) -> bool:
        return self.stop_requested or self.recycle or self._orphaned()

    def _orphaned(self) -> bool:
        """True once the parent is gone; asks the kernel at most twice a second."""
        now = time.monotonic()
        if now - self._parent_checked_at < 0.5:
            return False
        self._parent_checked_at = now
        gone = os.getppid() != self.parent_pid
        if gone:
            self.stop_requested = True  # for good: a later, throttled check must not undo it
        return gone

    def _step(self) -> None:
        self.metrics.flush_if_due()  # an idle or long-running child's counts too
        self._fail_refused()
        if self.slot.concurrent and self._slots is not None:
            self._slots.step()
            return
        if self.slot.board.paused:
            self._give_back_read_ahead()
            self.batches.flush()
            self.slot.set(State.WAITING)
            setproctitle(f"{self._title}: paused")
            self._sleep(0.2)
            return
        # In thread mode each task of the batch starts at once: no more than threads.
        most = min(self.options.batch_limit, self.options.threads or self.options.batch_limit)
        allowed, batch, headers, entries = self._claim(most)
        if allowed <= 0:
            self._limit_reached()
            return
        if batch is None:
            self.batches.flush()
            self.slot.set(State.EMPTY)
            setproctitle(f"{self._title}: waiting")
            self._wait_for_work()
            return
        if not (self.options.effective_max_jobs or self.options.threads or self._should_exit()):
            # A limit counted over all children reads none; a thread mode child starts
            # every task it holds, so it may hold no more than it has threads for. If
            # Redis cannot take the call, only a head start is lost: the batch in hand
            # runs all the same.
            with contextlib.suppress(*REDIS_ERRORS):
                self.batches.read_ahead(batch)
        if self.batches.acks_pending():
            # No reserve call carried them, and the batch they belong to has left our
            # slot: if we died now, the parent could not tell those tasks had finished.
            self._persist(self.batches.flush)
        self._run_batch(batch, headers, entries)
        self.time_limit.stop()

    def _claim(
        self, most: int
    ) -> tuple[int, Batch | None, list[tuple[str, int, int]], Sequence[int]]:
        """Reserve and hold a batch of at most ``most`` tasks: how many this child was
        allowed, the batch (None: none ready), its headers and its scoreboard entries."""
        with self._claiming():
            allowed = min(most, self._allowed())
            woken, self._woken = self._woken, None
            batch = self.batches.take(allowed, woken) if allowed > 0 else None
            if batch is None:
                return allowed, None, [], ()
            # Recorded inside the claim: under --max-jobs the other children count it.
            headers = [header(payload) or _NO_HEADER for payload in batch.reservation.payloads]
            return allowed, batch, headers, self.slot.hold(batch.queue_index, headers)

    def _allowed(self) -> int:
        """How many more tasks this child may take (``--max-jobs``, ``--once``)."""
        limit = self.options.batch_limit
        max_jobs = self.options.effective_max_jobs
        if max_jobs:
            limit = min(limit, max_jobs - self.slot.board.taken())
        return limit

    def _limit_reached(self) -> None:
        if self.slot.board.total_processed() >= self.options.effective_max_jobs:
            self.recycle = True
        else:
            self._sleep(0.05)  # the rest of the limit is in other children's hands

    @contextlib.contextmanager
    def _claiming(self) -> Iterator[None]:
        """Serialise taking tasks among children while ``--max-jobs`` counts them all."""
        if not self.options.effective_max_jobs or self.options.effective_concurrency == 1:
            yield
            return
        with self.slot.board.claiming():
            yield

    def _run_batch(
        self, batch: Batch, headers: list[tuple[str, int, int]], entries: Sequence[int]
    ) -> None:
        """Run (or, for ``async def`` tasks, start) a batch's tasks in order; ``entries``
        are their places in the scoreboard slot."""
        queue, payloads = batch.reservation.queue, batch.reservation.payloads
        margin, grace = self.options.reservation_margin, self.options.kill_grace
        for index, payload in enumerate(payloads):
            if self._should_exit():
                self._give_back_read_ahead()
                self._give_back(queue, payloads[index:], entries[index:])
                return
            timeout = headers[index][2] / 1000 or self.options.timeout
            # When this task's reservation runs out (reserve.lua), on our clock and early.
            expires_at = batch.sent_at + margin + timeout + grace
            worst_end = time.monotonic() + timeout + grace + _ACK_SAFETY
            if worst_end >= expires_at:
                expires_at = time.monotonic() + margin + timeout + grace
                renew = functools.partial(
                    self.queue.renew, queue, payload, margin + timeout + grace
                )
                if not self._persist(renew):
                    log.warning(
                        "%s: a prefetched task's reservation ran out before it started; "
                        "it went back to the queue and is left to another worker",
                        queue,
                    )
                    self.slot.set(State.HOLDING, entries[index] + 1)  # no longer ours
                    continue
            if self.batches.acks_due_by(worst_end):
                self._persist(self.batches.flush)
            fixed, entry = headers[index], entries[index]
            self._process(entry, queue, payload, None if fixed is _NO_HEADER else fixed, expires_at)
            # Between tasks, with no deadline: resting, or importing the next task's
            # module, is not this task overrunning, and a finished task must never look
            # like the running one (to be retried or failed) if this child dies now.
            # (A coroutine it started runs on: slot mode leaves its entry running.)
            self.slot.set(State.HOLDING, entry + 1)
            if memory_exceeded(self.options.memory):
                log.info(
                    "worker %d: over %d MB of memory; recycling", self.number, self.options.memory
                )
                self.recycle = True
            if self.options.rest:
                time.sleep(self.options.rest)
        if not self.slot.concurrent:
            self.slot.set(State.HOLDING, len(payloads))

    # -- one task -----------------------------------------------------------------

    def _process(
        self,
        index: int,
        queue: str,
        payload: bytes,
        fixed: tuple[str, int, int] | None,
        expires_at: float,
    ) -> None:
        """Run one task; ``fixed`` is its header as ``_hold`` read it (None: none)."""
        try:  # before the lookup: never import the module of a payload we refuse
            try:
                job = admit(payload, queue, self.config.secret, fixed)
            except UnregisteredType as unknown:
                job = self._admit_after_import(index, payload, queue, fixed, unknown)
        except InvalidPayload as exc:  # InvalidSignature included
            self.outcomes.rejected(index, queue, payload, None, type(exc).__name__, str(exc))
            return
        tries = job.tries or self.options.tries
        if job.attempts > tries:
            message = f"attempted {job.attempts} times, more than its {tries} tries"
            self.outcomes.rejected(index, queue, payload, job, "MaxAttemptsExceeded", message)
            return
        if job.retry_until is not None and time.time() >= job.retry_until:
            message = f"its retry_until (epoch {job.retry_until:.3f}) passed before it started"
            self.outcomes.rejected(index, queue, payload, job, "RetryUntilPassed", message)
            return
        workflow = bool(job.meta) and effects.involved(job)
        args = job.args
        if workflow:
            try:
                effects.check(job)
            except InvalidPayload as exc:
                self.outcomes.rejected(index, queue, payload, job, type(exc).__name__, str(exc))
                return
            cancelled = effects.is_member(job) and self._batch_cancelled(index, queue, payload, job)
            if cancelled is not False:  # None: failed already, for its unreadable batch
                if cancelled:
                    self._skip(index, queue, payload, job, expires_at)
                return
            if effects.is_callback(job):
                args = (effects.given(job, self.queue), *args)
        timeout = job.timeout or self.options.timeout
        started = time.monotonic()
        # The attempt starts here, before the lookup: importing the task's module is
        # part of it, under its time limit, and a child that dies importing (os._exit,
        # a crash in C) has used up an attempt instead of giving the task back for ever.
        self.slot.start(index, job.task, started + timeout + self.options.kill_grace)
        task = None
        stack: Sequence[Middleware] | None = None
        try:
            self.time_limit.arm(timeout)
            try:
                task = registry.lookup(job.task, self.options.preload)
                concurrent = self._threaded or is_async(task.fn)
                if not concurrent:  # slot mode titles each batch instead (slots.py)
                    # A registered name is Python identifiers; the id, from Redis, is
                    # escaped unless it is plain (it is, unless forged): a per-task cost.
                    job_id = job.id if job.id.isalnum() else shown(job.id)
                    setproctitle(f"{self._title}: running {job.task} {job_id}")
                if events.has_listeners("processing"):
                    events.emit(TaskEvent("processing", job))
                declared = task.options.middleware
                stack = stack_of(declared, job) if job.meta else declared
                if concurrent:  # runs on, on the event loop or a thread: see slots.py
                    attempt: Attempt = (
                        index,
                        queue,
                        payload,
                        job,
                        task,
                        args,
                        stack,
                        tries,
                        workflow,
                    )
                    self._slot_runner().start(attempt, started, timeout, expires_at)
                    return
                set_current_job(job)
                if stack or job.meta:
                    result = self._run(queue, task.fn, args, job, stack)
                else:
                    result = task.fn(*args, **job.kwargs)
                completion = self._completion(job, payload, result, started) if job.meta else None
            finally:
                self.time_limit.disarm()
        except BaseException as exc:  # SystemExit and the like too: user code raised it
            duration = time.monotonic() - started
            attempt = (index, queue, payload, job, task, args, stack, tries, workflow)
            self._attempt_failed(attempt, exc, duration, expires_at)
            return
        duration = time.monotonic() - started
        self._succeeded(
            index, queue, payload, job, task, tries, result, completion, duration, expires_at
        )

    def _completion(
        self, job: Job, payload: bytes, result: object, started: float
    ) -> effects.Completion | None:
        """What follows a success of a job with ``meta`` in a workflow (None if it is in
        none). After the call:
        a running task may have started a chain (job.chain). A result that cannot be
        kept or passed on raises ResultNotStored (see ``stored.py``)."""
        if effects.involved(job):
            started_at = self._started_at(started)
            return stored.completion(job, payload, result, started_at, self._limits, self.queue)
        return None

    def _attempt_failed(
        self, attempt: Attempt, exc: BaseException, duration: float, expires_at: float
    ) -> None:
        """An attempt raised: what that means (``outcomes.py`` has the rules)."""
        index, queue, payload, job, task, _, stack, tries, workflow = attempt
        # (task and stack are None if the lookup failed: see _process.)
        if type(exc) is BatchCancelled and workflow and effects.is_member(job):
            self._skip(index, queue, payload, job, expires_at)
        elif task is None and type(exc) is TaskNotRegistered:
            # Not a task (TaskImportFailed, its subclass, is an attempt that failed).
            self.outcomes.rejected(index, queue, payload, job, "TaskNotRegistered", str(exc))
        elif stack is None and isinstance(exc, InvalidPayload):  # its middleware
            self.outcomes.rejected(index, queue, payload, job, type(exc).__name__, str(exc))
        elif type(exc) is Release:
            self._release(attempt, exc, duration)
        elif isinstance(exc, ResultNotStored):  # deterministic: a rerun returns the same
            self.outcomes.failed(index, queue, payload, job, tries, exc, duration, final=True)
        elif type(exc) is RetryIn and exc.__cause__ is not None:
            cause = exc.__cause__
            self.outcomes.failed(index, queue, payload, job, tries, cause, duration, exc.delay)
        else:
            self.outcomes.failed(index, queue, payload, job, tries, exc, duration)

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
    ) -> None:
        # A success is the hot path, so it is settled here: the ack waits for the next
        # reserve call, and nothing else happens unless a hook or a listener waits for it.
        if completion is None:
            self.batches.acknowledge(queue, payload, expires_at)
        else:  # what follows it is pushed, idempotently, before it is acknowledged
            apply = functools.partial(effects.apply, completion, self.queue, (queue, payload))
            try:
                acked = self._persist(apply)
            except (RQueueError, redis.ResponseError) as exc:  # refused for good: no retry
                self.outcomes.failed(index, queue, payload, job, tries, exc, duration, final=True)
                return
            if not acked:
                self.batches.acknowledge(queue, payload, expires_at, completion.kept)
        self.metrics.succeeded(queue, job, duration)
        if job.max_exceptions is not None and job.attempts > 1:  # an earlier one may have raised
            forget_exceptions(self.queue, self._persist, queue, job)
        if job.meta:
            unique_locks.on_finish(self.queue, self._persist, queue, job)
        if task.options.after_succeeded is not None or events.has_listeners("processed"):
            self.outcomes.reporting(index)
        else:
            # Nothing more runs for this task: the next slot write records it as done.
            self.slot.count_processed()
        log_outcome(log, job, "succeeded", duration)
        if task.options.after_succeeded is not None:
            run_hook(task.options.after_succeeded, result, job)
        if events.has_listeners("processed"):
            events.emit(TaskEvent("processed", job, result=result, duration=duration))

    def _slot_runner(self) -> SlotRunner:
        if self._slots is None:
            self._slots = SlotRunner(self)
        return self._slots

    def _run(
        self,
        queue: str,
        fn: Callable[..., object],
        args: tuple[object, ...],
        job: Job,
        stack: Sequence[Middleware],
    ) -> object:
        """Run a task through its middleware; a unique one's lock is released (if it
        lasts only until processing) once they let it start."""

        def call() -> object:
            if job.meta:
                unique_locks.on_start(self.queue, self._persist, queue, job)
            return fn(*args, **job.kwargs)

        return run_through(stack, job, call) if stack else call()

    def _release(self, attempt: Attempt, exc: Release, duration: float) -> None:
        """The job is put back (``Release``), due in ``exc.delay`` seconds. A
        middleware's release gives its attempt back (the task did not run); the task's
        own uses it, and on its last try fails the task instead (``releases.py``)."""
        index, queue, payload, job, task, _, _, tries, _ = attempt
        by = releases.released_by(exc, task.fn if task is not None else None)
        own = by == releases.TASK_ITSELF
        if own and job.attempts >= tries:
            failure = releases.last_try(exc, job.attempts, tries)
            self.outcomes.failed(index, queue, payload, job, tries, failure, duration, final=True)
            return
        self.slot.set(State.RUNNING, index)  # stopped: no kill deadline meanwhile
        release = functools.partial(
            self.queue.release, queue, [payload], exc.delay, unstarted=not own
        )
        try:
            self._persist(release)
        except redis.ResponseError as refused:  # a command error: fail it, never loop
            self.outcomes.failed(index, queue, payload, job, tries, refused, duration, final=True)
            return
        self.slot.count_processed()
        used = f", attempt {job.attempts} of {tries} used" if own else ""
        log_outcome(log, job, f"released by {by} for {exc.delay:g} s{used}", duration)

    def _admit_after_import(
        self,
        index: int,
        payload: bytes,
        queue: str,
        fixed: tuple[str, int, int] | None,
        unknown: UnregisteredType,
    ) -> Job:
        """Admit a payload whose argument types its task's module registers, by importing
        that module first (as the attempt would), then decoding again.

        The payload passed every other check (its signature included): only a value's
        type was unknown. The import runs under the default time limit, with a kill
        deadline in the slot, as an attempt's import does. Whatever goes wrong, the
        payload is refused with the original reason.
        """
        name = task_name(payload)
        if name is None:
            raise unknown
        timeout = self.options.timeout
        self.slot.set(State.RUNNING, index, time.monotonic() + timeout + self.options.kill_grace)
        try:
            self.time_limit.arm(timeout)
            try:
                registry.lookup(name, self.options.preload)
            finally:
                self.time_limit.disarm()
        except BaseException:  # TaskTimeout included: the import did not finish
            raise unknown from None
        return admit(payload, queue, self.config.secret, fixed)

    def _batch_cancelled(self, index: int, queue: str, payload: bytes, job: Job) -> bool | None:
        """Whether the member's batch was cancelled; None, with the task failed, if the
        batch's state cannot be read (a key of the wrong type): it alone goes to
        ``:failed``, where it can be retried once the state is mended."""
        try:
            return self._persist(functools.partial(effects.batch_cancelled, job, self.queue))
        except redis.ResponseError as exc:
            self.outcomes.rejected(index, queue, payload, job, "ResponseError", str(exc))
            return None

    def _skip(self, index: int, queue: str, payload: bytes, job: Job, expires_at: float) -> None:
        """A member of a cancelled batch: counted as skipped, acknowledged, not run."""
        completion = effects.on_skip(job, payload)
        self._persist(functools.partial(effects.apply, completion, self.queue))
        self.batches.acknowledge(queue, payload, expires_at, completion.kept)
        self.slot.count_processed()
        log_outcome(log, job, "skipped: its batch was cancelled", 0.0)

    @staticmethod
    def _started_at(started: float) -> float:
        """Wall-clock time of a monotonic reading (for the result record)."""
        return time.time() - (time.monotonic() - started)

    # -- giving back, acking, waiting ---------------------------------------------

    def _give_back(self, queue: str, unstarted: list[bytes], entries: Sequence[int] = ()) -> None:
        """Release tasks this child will not run, attempts returned, at the queue's front.

        The child's claims key goes in the same step: once another worker holds them,
        nothing may give these tasks back again.
        """
        # Forget them in the slot first: if we die in between, they wait for their
        # reservation to expire rather than being released twice.
        self.slot.forget(entries)
        release = functools.partial(
            self.queue.release, queue, unstarted, unstarted=True, claims=self.batches.claims
        )
        self._persist(release)

    def _give_back_read_ahead(self) -> None:
        """A child that stops or pauses gives back the batch it had reserved ahead."""
        ahead = self._persist(self.batches.settle)
        if ahead is not None and ahead.reservation.payloads:
            self._give_back(ahead.reservation.queue, ahead.reservation.payloads)

    def _persist(self, call: Callable[[], T]) -> T:
        """Retry a state change until Redis takes it: an outcome must never be dropped."""
        return persist(call, self._on_persist_error)

    def _on_persist_error(self, failures: int, exc: Exception) -> None:
        if os.getppid() != self.parent_pid and failures > 50:
            raise exc  # orphaned and Redis gone: the reservation's expiry takes over
        self._backoff(failures, exc)

    def _backoff(self, failures: int, exc: Exception | None) -> None:
        if failures == 1 and exc is not None:
            log.warning(
                "worker %d: Redis at %s unreachable (%s); retrying with backoff",
                self.number,
                self.config.redacted_url(),
                exc,
            )
        self._sleep(backoff_delay(failures))

    def _wait_for_work(self) -> None:
        """Wait for a push, or for a queue's rate limit to free a task (whichever first).

        A rate-limited queue's pushes are not waited for (it could take none of them):
        its wait is exactly until its limit frees the next task, at most a second at a
        time so that a pause or a stop is seen as soon as in any idle wait.
        """
        queues, longest = self.options.queues, 1.0
        if self.batches.limited:
            queues = tuple(q for q in queues if q not in self.batches.limited)
            longest = min(1.0, *self.batches.limited.values())
            if not queues:
                self._sleep(longest)
                return
        if self.options.block_for > 0:
            self._interruptible = True
            try:
                self._woken = self.queue.wait_for_ready(
                    queues, min(self.options.block_for, longest)
                )
            finally:
                self._interruptible = False
        else:
            self._sleep(min(self.options.sleep, longest))

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requested = True
        self._interrupt()
