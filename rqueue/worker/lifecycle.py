"""One attempt's lifecycle, the same in every execution mode: admit, prepare, run, settle.

:meth:`Lifecycle.process` reads as the sentence it is, in the shape of Laravel's
``Worker::process()``: admit the payload (or refuse it), prepare its workflow's part
(or skip it), start it (under its time limit, its task looked up), call it through its
middleware, and settle it: succeeded, failed (retried or for good), released,
skipped or cancelled. The mode decides only *how* the task's function is called:
inline here, under SIGALRM (process mode), or handed to the concurrent runner
(``concurrent.py``), which awaits it on the loop or in a thread and then settles it
with the same methods (:meth:`call`, :meth:`completion`, :meth:`succeeded`,
:meth:`raised`).

Features take part through their participants' hooks (``attempt.py``,
``participants.py``): unique locks, exception counting and metrics are no branch
here. A workflow's part (``workflow.py``) is a step of its own, because its
completion replaces the acknowledgement itself. What an attempt that raised comes
to is ``verdicts.py``'s decision (from the named rules of ``rules.py``), the inline
runner's too; this module carries it out, with ``outcomes.py`` for a failure.

A success is the hot path and settled here, inline: its ack waits for the next
reserve call (``reservations.py``), and nothing else happens unless a participant,
a hook or a listener waits for it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import redis

from rqueue import events
from rqueue.encoding.payload import Job, task_name
from rqueue.errors import InvalidPayload, TaskCancelled, UnregisteredType
from rqueue.events import TaskEvent
from rqueue.middleware.base import Parked, run_through
from rqueue.middleware.stacks import stack_of
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import Persist
from rqueue.tasks import registry
from rqueue.tasks.current import set_current_run
from rqueue.worker import reports, rules, verdicts
from rqueue.worker.admission import admit
from rqueue.worker.attempt import Attempt
from rqueue.worker.logs import log_outcome
from rqueue.worker.options import WorkerOptions
from rqueue.worker.outcomes import Outcomes
from rqueue.worker.participants import Roster
from rqueue.worker.reservations import Reservations
from rqueue.worker.scoreboard import Slot, State
from rqueue.worker.timeouts import TimeLimit
from rqueue.worker.titles import ProcessTitle
from rqueue.worker.verdicts import Abandoned, Cancelled, Failed, Refused, Released
from rqueue.worker.workflow import WorkflowPart
from rqueue.workflows import effects

log = logging.getLogger("rqueue.worker")

_ABANDONED = "stopped: this worker no longer holds it, so another settles it"

Header = tuple[str, int, int]
"""A payload's header as the child read it when it held the batch (store/header.py)."""


class Lifecycle:
    """Runs and settles one worker child's attempts.

    An ``async def`` task, or with ``--threads`` any task, runs on the concurrent
    runner: ``start_concurrently`` hands it there once started. ``title`` is the
    process's title, which names the task running.
    """

    scoping = False
    """Calls are made in their participants' call scopes (``scoped.py``); not here."""

    def __init__(
        self,
        store: RedisQueue,
        options: WorkerOptions,
        config: Config,
        slot: Slot,
        reservations: Reservations,
        persist: Persist,
        roster: Roster,
        title: ProcessTitle,
        start_concurrently: Callable[[Attempt], None],
    ) -> None:
        self.store = store
        self.options = options
        self.config = config
        self.slot = slot
        self.reservations = reservations
        self.persist = persist
        self.roster = roster
        self.outcomes = Outcomes(store, options, slot, persist, roster)
        self.workflow = WorkflowPart(
            store, config, persist, self.outcomes, self.skipped, counts_wait=not self.scoping
        )
        self.title = title
        self.threaded = options.threads > 0
        self.start_concurrently = start_concurrently
        self.time_limit: TimeLimit
        """Set by the child once it runs (it installs the SIGALRM handler)."""

    # -- the lifecycle ------------------------------------------------------------

    def process(
        self, entry: int, queue: str, payload: bytes, header: Header | None, expires_at: float
    ) -> None:
        """Run and settle one reserved task (``header``: as the child read it, if it did).
        One that runs concurrently is settled by the concurrent runner as it ends."""
        attempt = self.admit(entry, queue, payload, header, expires_at)
        if attempt is None or (attempt.job.meta and not self.workflow.prepare(attempt)):
            return  # refused, or settled before it ran (a cancelled batch's member)
        try:
            try:
                if self.start(attempt):
                    self.start_concurrently(attempt)  # it runs on: see concurrent.py
                    return
                set_current_run(attempt)
                result = self.call(attempt)
                meta = attempt.job.meta
                completion = self.workflow.completion(attempt, result) if meta else None
            finally:
                self.time_limit.disarm()
        except BaseException as exc:  # SystemExit and the like too: user code raised it
            self.raised(attempt, exc, time.monotonic() - attempt.started)
            return
        self.succeeded(attempt, result, completion, time.monotonic() - attempt.started)

    # -- admit, start, call -----------------------------------------------------------

    def admit(
        self, entry: int, queue: str, payload: bytes, header: Header | None, expires_at: float
    ) -> Attempt | None:
        """The attempt at a reserved payload; None if it may not run (filed as failed)."""
        try:  # before the lookup: never import the module of a payload we refuse
            try:
                job = admit(payload, queue, self.config.secret, header, self.config.keyring)
            except UnregisteredType as unknown:
                job = self._admit_after_import(entry, payload, queue, header, unknown)
        except InvalidPayload as exc:  # InvalidSignature included
            self.outcomes.rejected(entry, queue, payload, None, type(exc).__name__, str(exc))
            return None
        tries = job.tries or self.options.tries
        refused = rules.refused_before_start(job, tries)
        if refused is not None:
            self.outcomes.rejected(entry, queue, payload, job, *refused)
            return None
        roster = self.roster  # a plain job's participants without a call: the hot path
        plain = not job.meta and job.max_exceptions is None
        participants = roster.plain if plain else roster.of(job)
        return Attempt(entry, queue, payload, job, expires_at, tries, participants, job.args)

    def start(self, attempt: Attempt) -> bool:
        """Start it: mark it running (with its kill deadline), arm its time limit, find
        its task and build its middleware; True if it runs concurrently.

        It starts before the lookup: importing the task's module is part of the
        attempt, under its time limit, and a child that dies importing (os._exit, a
        crash in C) has used up an attempt instead of giving the task back for ever.
        The caller disarms the time limit, however this ends."""
        job = attempt.job
        attempt.timeout = timeout = job.timeout or self.options.timeout
        attempt.started = started = time.monotonic()
        self.slot.start(attempt.entry, job.task, started + timeout + self.options.kill_grace)
        self.time_limit.arm(timeout)
        attempt.task = task = registry.lookup(job.task, self.options.preload)
        concurrent = self.threaded or task.is_async
        if not concurrent:  # the concurrent runner titles each batch instead
            # A registered name is Python identifiers: nothing from Redis to escape.
            self.title.show(f"running {job.task}")
        if events.has_listeners("processing"):
            events.emit(TaskEvent("processing", job))
        declared = task.options.middleware
        attempt.stack = stack_of(declared, job, self.options.group_limits) if job.meta else declared
        return concurrent

    def call(self, attempt: Attempt, invoke: Callable[[], Any] | None = None) -> Any:
        """Call the task through its middleware; its participants hear ``before_call``
        once they let it start. ``invoke`` calls the function (the mode's way: by
        default at once, in this thread)."""
        job, task = attempt.job, attempt.task
        assert task is not None  # looked up
        if invoke is None:
            if not attempt.stack and attempt.participants is self.roster.plain:
                # The hot path: a plain task's participants need no before_call (a
                # batch member's are the same: only a unique lock's or a count's do).
                return task.fn(*attempt.args, **job.kwargs)
            invoke = functools.partial(task.fn, *attempt.args, **job.kwargs)

        def started() -> Any:
            self.before_call(attempt)
            return invoke()

        return run_through(attempt.stack, job, started) if attempt.stack else started()

    def before_call(self, attempt: Attempt) -> None:
        """Tell its participants the task is about to run (a unique lock may go now)."""
        for participant in attempt.participants:
            participant.before_call(attempt.queue, attempt.job)

    # -- settle ---------------------------------------------------------------------

    def succeeded(
        self,
        attempt: Attempt,
        result: object,
        completion: effects.Completion | None,
        duration: float,
    ) -> None:
        """Acknowledge it (its ack rides on the next reserve call), or apply its
        workflow's completion first; then its participants, the log, its hook and
        the app's listeners."""
        queue, job, task = attempt.queue, attempt.job, attempt.task
        assert task is not None
        if completion is None:
            self.reservations.pending.acknowledge(queue, attempt.payload, attempt.expires_at)
        elif not self.workflow.applied(attempt, completion, duration, self.reservations):
            return  # refused for good: failed instead
        for participant in attempt.participants:
            participant.after_succeeded(queue, job, duration)
        heard = reports.hears_success(task)
        if heard:
            self.outcomes.reporting(attempt.entry)
        else:
            # Nothing more runs for this task: the next slot write records it as done.
            self.slot.count_processed()
        log_outcome(log, job, "succeeded", duration)
        if heard:
            reports.succeeded(task, job, result, duration)

    def raised(self, attempt: Attempt, exc: BaseException, duration: float) -> None:
        """An attempt raised: settled as its verdict says (``verdicts.py``)."""
        verdict = verdicts.of_raised(attempt, exc)
        if isinstance(verdict, Failed):
            self.outcomes.failed(attempt, verdict, duration)
        elif isinstance(verdict, Released):
            self.released(attempt, verdict, duration)
        elif isinstance(verdict, Refused):
            self.outcomes.refused(attempt, verdict.kind, verdict.message)
        elif isinstance(verdict, Cancelled):
            self.outcomes.cancelled(attempt, verdict, duration)
        elif isinstance(verdict, Abandoned):
            self.slot.count_processed()
            log_outcome(log, attempt.job, _ABANDONED, duration, logging.WARNING)
        else:
            self.skipped(attempt)

    def released(self, attempt: Attempt, verdict: Released, duration: float) -> None:
        """Put back, due in its release's delay: a middleware's release gives its
        attempt back (the task did not run: ``unstarted``); the task's own uses it. A
        call ``Parked`` by its middleware was moved by that middleware's script: nothing
        is sent (``Concurrency``)."""
        job, own, delay = attempt.job, verdict.own, verdict.release.delay
        self.slot.set(State.RUNNING, attempt.entry)  # stopped: no kill deadline meanwhile
        if isinstance(verdict.release, Parked) and not own:  # its middleware's script moved it
            self.slot.count_processed()
            log_outcome(log, job, f"parked by {verdict.by}, due in {delay:g} s", duration)
            return
        release = functools.partial(
            self.store.release, attempt.queue, [attempt.payload], delay, unstarted=not own
        )
        try:
            moved = self.persist(release)
        except redis.ResponseError as refused:  # a command error: fail it, never loop
            self.outcomes.failed(attempt, Failed(refused, final=True), duration)
            return
        if moved < 0:  # its cancel was requested: kept reserved, cancelled instead
            stopped = TaskCancelled(f"task {job.id} was cancelled while it ran")
            self.outcomes.cancelled(attempt, Cancelled(stopped), duration)
            return
        self.slot.count_processed()
        used = f", attempt {job.attempts} of {attempt.tries} used" if own else ""
        log_outcome(log, job, f"released by {verdict.by} for {delay:g} s{used}", duration)

    def skipped(self, attempt: Attempt) -> None:
        """A member of a cancelled batch: counted as skipped, acknowledged, not run."""
        kept = self.workflow.skip(attempt)
        self.reservations.pending.acknowledge(
            attempt.queue, attempt.payload, attempt.expires_at, kept
        )
        self.slot.count_processed()
        log_outcome(log, attempt.job, "skipped: its batch was cancelled", 0.0)

    def _admit_after_import(
        self,
        entry: int,
        payload: bytes,
        queue: str,
        header: Header | None,
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
        self.slot.set(State.RUNNING, entry, time.monotonic() + timeout + self.options.kill_grace)
        try:
            self.time_limit.arm(timeout)
            try:
                registry.lookup(name, self.options.preload)
            finally:
                self.time_limit.disarm()
        except BaseException:  # TaskTimeout included: the import did not finish
            raise unknown from None
        return admit(payload, queue, self.config.secret, header, self.config.keyring)
