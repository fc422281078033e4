"""The worker child: reserve tasks, run each under its time limit, hand on the outcome.

A child reserves a batch of tasks in one round trip when the queue is deep, runs
them one after another and acknowledges successes together with its next reserve
call, so the hot path costs well under one round trip per task; a success is
settled inline for that reason. Each task's attempt, from admission to its settled
outcome, is ``lifecycle.py``'s; this module is the loop around it: claiming batches,
renewing a prefetched task's reservation, pausing, waiting for work, giving back what
the child will not run. Everything the parent needs to recover the child's tasks if
it dies is kept in its scoreboard slot.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TypeVar

from rqueue.settings.config import Config
from rqueue.store import progress
from rqueue.store.default import use
from rqueue.store.header import header
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS, backoff_delay, persist
from rqueue.tasks.current import Runner, current_run, set_runner
from rqueue.tasks.iterable import use_keeper
from rqueue.tasks.progress import use_sink
from rqueue.text import shown
from rqueue.worker import parent_failures  # noqa: F401  (registers the internal report task)
from rqueue.worker.attempt import Attempt
from rqueue.worker.concurrent import ConcurrentRunner
from rqueue.worker.interrupts import Interrupted, InterruptibleWaits
from rqueue.worker.iteration import ChildCheckpoints
from rqueue.worker.lifecycle import Header, Lifecycle
from rqueue.worker.options import WorkerOptions
from rqueue.worker.outcomes import counted_name
from rqueue.worker.participants import Roster, recorder
from rqueue.worker.process import memory_exceeded, parent_death_signal
from rqueue.worker.reservations import Reservations
from rqueue.worker.reserved import Reserved
from rqueue.worker.scoped import ScopedLifecycle
from rqueue.worker.scoreboard import Slot, State
from rqueue.worker.timeouts import TimeLimit
from rqueue.worker.titles import ProcessTitle

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
        self.store = RedisQueue(config)
        self.reservations = Reservations(self.store, options, claims)
        self.metrics = recorder(self.store, options.metrics, counted_name)
        self.stop_requested = False
        self.recycle = False
        self._parent_checked_at = 0.0
        self._woken: str | None = None
        """The queue whose push ended the last idle wait: its batch is reserved first."""
        self._concurrent: ConcurrentRunner | None = None
        """Runs ``async def`` tasks on an event loop, made when the first one comes, and
        with ``--threads`` every sync task in a thread (thread mode)."""
        # Queue names are checked (store/keys.py), and escaped once here all the same.
        self.title = ProcessTitle(
            shown(
                f"rqueue: worker {number}/{options.effective_concurrency} "
                f"{','.join(options.queues)}"
            )
        )
        """The process title: its stem, and each state's words after it."""
        roster = Roster(self.store, self.persist, self.metrics)
        self.lifecycle = (ScopedLifecycle if roster.scoping else Lifecycle)(
            self.store,
            options,
            config,
            slot,
            self.reservations,
            self.persist,
            roster,
            self.title,
            self._start_concurrently,
        )

    @property
    def time_limit(self) -> TimeLimit:
        """The per-task time limit (SIGALRM), made once the child runs."""
        return self.lifecycle.time_limit

    @time_limit.setter
    def time_limit(self, limit: TimeLimit) -> None:
        self.lifecycle.time_limit = limit

    # -- the loop -----------------------------------------------------------------

    def run(self) -> int:
        use(self.store)
        set_runner(Runner(self.store, self.options.timeout, self.options.kill_grace, {}))
        use_sink(functools.partial(progress.write, self.store))  # current_job().progress()
        use_keeper(self._checkpoints())  # iterable tasks' checkpoints
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGUSR1, self._on_cancel)
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
        while not self.should_exit():
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
        self._give_back_read_ahead()  # at once: a warm stop may wait for long tasks
        if self._concurrent is not None:  # a warm stop lets running coroutines finish
            self._concurrent.drain()
        self.persist(self.reservations.flush)
        self._fail_refused()
        self.metrics.flush()
        self.slot.set(State.WAITING)
        return 0

    def _fail_refused(self) -> None:
        """Fail, each alone, the successes whose acknowledgement Redis refused."""
        refused = self.reservations.refused
        while refused:
            self.lifecycle.outcomes.ack_refused(*refused[0])
            del refused[0]

    def should_exit(self) -> bool:
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
        if self.slot.concurrent and self._concurrent is not None:
            self._concurrent.step()
            return
        if self.slot.board.paused:
            self._give_back_read_ahead()
            self.reservations.flush()
            self.slot.set(State.WAITING)
            self.title.show("paused")
            self._sleep(0.2)
            return
        # In thread mode each task of the batch starts at once: no more than threads.
        most = min(self.options.batch_limit, self.options.threads or self.options.batch_limit)
        allowed, batch, headers, entries = self.claim(most)
        if allowed <= 0:
            self._limit_reached()
            return
        if batch is None:
            self.reservations.flush(skip_down=True)
            self.slot.set(State.EMPTY)
            self.title.show("waiting")
            self._wait_for_work()
            return
        if not self.options.threads:  # thread mode reads ahead once its threads run
            self.read_ahead(batch)
        if self.reservations.pending:
            # No reserve call carried them, and the batch they belong to has left our
            # slot: if we died now, the parent could not tell those tasks had finished.
            # (Those of a shard that is down wait for it: the others' queues do not.)
            self.persist(functools.partial(self.reservations.flush, skip_down=True))
        self.run_batch(batch, headers, entries)
        self.time_limit.stop()

    def read_ahead(self, batch: Reserved, size: int = 0) -> None:
        """Send the next reserve call before ``batch`` runs (reservations.py), of ``size``
        tasks (0: as many as ``batch`` grew to). Not while a limit counted over all
        children applies (it reads none) or the child stops. If Redis cannot take the
        call, only a head start is lost: the batch in hand runs all the same."""
        if self.options.effective_max_jobs or self.should_exit():
            return
        with contextlib.suppress(*REDIS_ERRORS):
            self.reservations.read_ahead(batch, size)

    def claim(self, most: int) -> tuple[int, Reserved | None, list[Header], Sequence[int]]:
        """Reserve and hold a batch of at most ``most`` tasks: how many this child was
        allowed, the batch (None: none ready), its headers and its scoreboard entries.
        While ``--max-jobs`` counts every child's tasks, children take turns."""
        if self.options.effective_max_jobs and self.options.capacity > 1:  # it may grow
            with self.slot.board.claiming():
                return self._claim(most)
        return self._claim(most)

    def _claim(self, most: int) -> tuple[int, Reserved | None, list[Header], Sequence[int]]:
        allowed = min(most, self._allowed())
        woken, self._woken = self._woken, None
        # In thread and async modes a batch starts at once: it is sized by free threads
        # and slots, not cut to what a child may hold of a queue with levels.
        at_once = self.slot.concurrent or self.options.threads > 0
        batch = self.reservations.take(allowed, woken, at_once) if allowed > 0 else None
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

    def run_batch(self, batch: Reserved, headers: list[Header], entries: Sequence[int]) -> None:
        """Run (or, for ``async def`` tasks, start) a batch's tasks in order; ``entries``
        are their places in the scoreboard slot."""
        queue, payloads = batch.reservation.queue, batch.reservation.payloads
        margin, grace = self.options.reservation_margin, self.options.kill_grace
        began = time.monotonic()
        for index, payload in enumerate(payloads):
            if self._concurrent is not None and self.slot.concurrent:
                self._concurrent.make_room()
            if self.should_exit():
                self._give_back_read_ahead()
                self._give_back(queue, payloads[index:], entries[index:])
                return
            timeout = headers[index][2] / 1000 or self.options.timeout
            # When this task's reservation runs out (reserve.lua), on our clock and early.
            expires_at = batch.sent_at + margin + timeout + grace
            worst_end = time.monotonic() + timeout + grace + _ACK_SAFETY
            lasting = margin + timeout + grace
            if batch.unconfirmed and time.monotonic() + _ACK_SAFETY < batch.sent_at + margin:
                # It lasts the margin alone (reservations.py): confirmed now, not waited for.
                self.reservations.confirm(queue, payload, lasting)
                expires_at = time.monotonic() + lasting
            elif worst_end >= expires_at or batch.unconfirmed:
                expires_at = time.monotonic() + lasting
                renew = functools.partial(self.store.renew, queue, payload, lasting)
                if not self.persist(renew):
                    log.warning(
                        "%s: a prefetched task's reservation ran out before it started; "
                        "it went back to the queue and is left to another worker",
                        queue,
                    )
                    self.slot.set(State.HOLDING, entries[index] + 1)  # no longer ours
                    continue
            if self.reservations.pending.due_by(worst_end):  # a down shard's acks wait for it
                self.persist(functools.partial(self.reservations.flush, skip_down=True))
            fixed, entry = headers[index], entries[index]
            self.lifecycle.process(
                entry, queue, payload, None if fixed is _NO_HEADER else fixed, expires_at
            )
            # Between tasks, with no deadline: resting, or importing the next task's
            # module, is not this task overrunning, and a finished task must never look
            # like the running one (to be retried or failed) if this child dies now.
            # (A coroutine or thread it started runs on: its entry stays running.)
            self.slot.set(State.HOLDING, entry + 1)
            if memory_exceeded(self.options.memory):
                log.info(
                    "worker %d: over %d MB of memory; recycling", self.number, self.options.memory
                )
                self.recycle = True
            if self.options.rest:
                time.sleep(self.options.rest)
        if not self.slot.concurrent:  # every task ran here, one after another: timed
            self.slot.set(State.HOLDING, len(payloads))
            self.reservations.held.ran(queue, len(payloads), time.monotonic() - began)

    def _checkpoints(self) -> ChildCheckpoints:
        """Where this child's iterable tasks keep their checkpoints: a warm stop is
        seen at their next item boundary (``iteration.py``)."""
        return ChildCheckpoints(
            self.store,
            self.options,
            self.slot,
            lambda: self.stop_requested,
            lambda: self.time_limit,
            lambda: self._concurrent,
        )

    def _concurrent_runner(self) -> ConcurrentRunner:
        if self._concurrent is None:
            self._concurrent = ConcurrentRunner(self, self.lifecycle)
        return self._concurrent

    def _start_concurrently(self, attempt: Attempt) -> None:
        self._concurrent_runner().start(attempt)

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
            self.store.release, queue, unstarted, unstarted=True, claims=self.reservations.claims
        )
        self.persist(release)

    def _give_back_read_ahead(self) -> None:
        """A child that stops or pauses gives back the batch it had reserved ahead."""
        ahead = self.persist(self.reservations.settle)
        if ahead is not None and ahead.reservation.payloads:
            self._give_back(ahead.reservation.queue, ahead.reservation.payloads)

    def persist(self, call: Callable[[], T]) -> T:
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

    def heard(self, queue: str | None, idle: bool = False) -> None:
        """A push to ``queue`` ended a wait for work: its batch is reserved first. A child
        left ``idle`` by it (no task of its own running) sends that reserve call at once
        (``Reservations.reserve_woken``), before its own bookkeeping."""
        self._woken = queue
        if idle and queue is not None and self.reserves_early():
            self.reservations.reserve_woken(queue)

    def reserves_early(self) -> bool:
        """Whether a reserve call may go before ``take`` asks (as a push wakes the child,
        or behind its wait): not under --max-jobs, whose claims are counted under the
        board's lock, nor once it stops."""
        return not (self.options.effective_max_jobs or self.should_exit())

    def _wait_for_work(self) -> None:
        """Wait for a push, or for a queue's rate limit to free a task (whichever first).

        A rate-limited queue's pushes are not waited for (it could take none of them):
        its wait is exactly until its limit frees the next task, at most a second at a
        time so that a pause or a stop is seen as soon as in any idle wait. Nor are
        those of a queue whose shard is down (``outages.py``): the wait lasts until its
        back-off ends, when it is tried again. A wait cut short by a shard's outage on
        Redis Cluster goes straight to the next take (which finds the queues that are
        down), not through the child's back-off: the other shards' pushes are not kept
        waiting.
        """
        queues, longest = self.options.queues, 1.0
        limited, outages = self.reservations.limited, self.reservations.outages
        if limited or outages:
            queues = tuple(q for q in queues if q not in limited and not outages.down(q))
            longest = min(1.0, outages.next_try(), *limited.values())
            if not queues:
                self._sleep(longest)
                return
        if self.options.block_for > 0:
            self._interruptible = True
            try:
                woken, reserved = self._wait_for_push(queues, min(self.options.block_for, longest))
            except REDIS_ERRORS:
                if not self.config.cluster:
                    raise
                woken, reserved = None, False  # a shard's outage: the next take marks it down
            finally:
                self._interruptible = False
            self.heard(woken, idle=not reserved)
        else:
            self._sleep(min(self.options.sleep, longest))

    def _wait_for_push(self, queues: Sequence[str], timeout: float) -> tuple[str | None, bool]:
        """Block until a push to one of ``queues`` or ``timeout``: the queue pushed to,
        and whether a reserve call went behind the wait. A child of one queue sends it
        there (``Reservations.wait_then_reserve``), unless what ``heard`` says forbids
        a reserve call before ``take``."""
        if len(queues) == 1 and self.reserves_early():
            woken = self.reservations.wait_then_reserve(queues[0], timeout)
            if woken is not None:
                return queues[0] if woken else None, True
        return self.store.wait_for_ready(queues, timeout), False

    def _on_cancel(self, signum: int, frame: FrameType | None) -> None:
        """SIGUSR1: the parent asks a running task to stop (``cancels.py``); the id it
        wrote for the task's entry says which. Inline (process mode), ``TaskCancelled``
        is raised in the task, as a timeout is; on the event loop the runner delivers it."""
        if self._concurrent is not None and self.slot.concurrent:
            self._concurrent.deliver_cancels()
        run = current_run()
        asked = isinstance(run, Attempt) and self.slot.cancel_requested(run.entry) == run.job.id
        if asked and run is not None and not run.job.cancelled:
            self.time_limit.interrupt(run.job)

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requested = True
        self._interrupt()
