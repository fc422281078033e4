"""Run task calls inline, in this process, the way a worker would run them.

Shared by ``sync()`` (a dispatch runs at once) and ``fake().run_all()`` (what was
recorded runs when asked). Each call goes through the real payload code (encode,
then decode: an argument msgpack cannot carry fails here as it would at a real
dispatch), the task's middleware stack, its retries, and the workflow rules of
``rqueue.workflows.effects`` (a chain's next step, its catch, a batch's callbacks),
with a batch's counts kept in memory (``memory_batch.py``) instead of in Redis.
What an attempt that raised comes to is the worker's own decision
(``rqueue.worker.verdicts``); only its keeping differs: in memory, here.

What differs from a worker, on purpose: nothing sleeps (a backoff or a ``later()``
delay is not waited for, nor a task's own ``Release``, which uses an attempt as in a
worker), there is no time limit, and a middleware's ``Release`` leaves the call
``delayed`` instead of running it again (docs/testing.md).
"""

from __future__ import annotations

import functools
import itertools
import math
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import rqueue.tasks.registry as registry
from rqueue.encoding.payload import Job, decode, new_id
from rqueue.errors import TaskCancelled, TaskFailed, describe
from rqueue.middleware.base import run_through
from rqueue.middleware.stacks import stack_of
from rqueue.settings.config import Config
from rqueue.store.cancel import CancelOutcome
from rqueue.store.live_events import LiveEvent
from rqueue.store.progress import Progress
from rqueue.tasks import awaiting
from rqueue.tasks.current import Runner, current_job, current_runner, set_current_job, set_runner
from rqueue.tasks.decorator import registered_task
from rqueue.tasks.definition import PendingDispatch, Task
from rqueue.tasks.handles import Dispatched, TaskHandle
from rqueue.tasks.progress import reset_sink, use_sink
from rqueue.testing.memory_batch import LaterBatch, MemoryBatch, in_memory
from rqueue.testing.waiting import Waits
from rqueue.worker import verdicts
from rqueue.worker.attempt import Attempt, Participants
from rqueue.worker.max_exceptions import ExceptionCount
from rqueue.worker.options import WorkerOptions
from rqueue.worker.outcomes import retry_in
from rqueue.worker.reports import HOOKS
from rqueue.worker.verdicts import Cancelled, Failed, Released, Skipped, Verdict
from rqueue.workflows import callbacks, effects
from rqueue.workflows.batches import BATCH, GETS, Batch
from rqueue.workflows.chains import Chain, DispatchedChain
from rqueue.workflows.nesting import continuation
from rqueue.workflows.pending_batch import PendingBatch
from rqueue.workflows.shapes import batch_spec
from rqueue.workflows.steps import Step, derived_id

_DEFAULTS = WorkerOptions()
"""A worker's defaults (``tries``, ``timeout``, ``kill_grace``) for calls that set none."""


@dataclass
class Outcome:
    """How one call ended: ``succeeded``, ``failed``, ``cancelled`` (a batch member
    skipped, a call cancelled before it ran, or one whose run was asked to stop) or
    ``delayed`` (released by its middleware, and not run again)."""

    id: str
    task: str
    status: str
    value: Any = None
    failure: TaskFailed | None = None
    attempts: int = 0
    released_for: float | None = None

    def result(self) -> Any:
        """The value, or what ``Dispatched.result()`` raises for this outcome."""
        if self.status == "succeeded":
            return self.value
        if self.failure is not None:
            raise self.failure
        if self.status == "cancelled":
            raise TaskCancelled(f"task {self.id} was cancelled")
        raise TimeoutError(
            f"task {self.id} was released by its middleware for {self.released_for:g} s; "
            "run inline, a released call is not run again"
        )


class InlineDispatched(TaskHandle[Any]):
    """A task's handle whose ``status()`` and ``result()`` answer from memory."""

    _runner: InlineRunner

    @classmethod
    def of(cls, runner: InlineRunner, job_id: str, task: str, queue: str) -> InlineDispatched:
        handle = cls(job_id, task, queue)
        handle._runner = runner
        return handle

    def status(self) -> str:
        """As a worker's record would say: ``pending`` (or ``delayed``) until it runs."""
        found = self._runner.outcomes.get(self.id)
        if found is not None:
            return found.status
        return self._runner.waiting.get(self.id, "unknown")

    def result(self, timeout: float | None = None) -> Any:
        """Its value; TaskFailed, TaskCancelled as from a worker; TimeoutError if it has
        not run (a fake before ``run_all()``) or was released."""
        found = self._runner.outcomes.get(self.id)
        if found is None:
            raise TimeoutError(f"task {self.id} has not run (it is {self.status()})")
        return found.result()

    def progress(self) -> Progress | None:
        """The latest progress its run reported (``current_job().progress()``), kept in
        memory as a worker's store would keep it."""
        return self._runner.progress.get(self.id)

    def events(self, timeout: float = 60.0) -> Iterator[LiveEvent]:
        """None: inline runs record no live events (nor are there workers to)."""
        return iter(())

    def cancel(self, fail: bool = False) -> CancelOutcome:
        """Cancel it if it has not run yet (a fake's recorded call); run inline, nothing
        is running meanwhile, so ``fail`` changes nothing."""
        if self.id in self._runner.outcomes:
            if self._runner.outcomes[self.id].status == "cancelled":
                return CancelOutcome.ALREADY_CANCELLED
            return CancelOutcome.NOT_PENDING
        if self.id not in self._runner.waiting:
            return CancelOutcome.NOT_PENDING
        del self._runner.waiting[self.id]
        self._runner.outcomes[self.id] = Outcome(self.id, self.task, "cancelled")
        return CancelOutcome.CANCELLED


class InlineRunner:
    """Runs payloads one after another and remembers each call's outcome by id."""

    def __init__(self, later: Callable[[list[bytes]], None] | None = None) -> None:
        self.later = later
        """Where payloads made while a call runs go (``Batch.add``); None: run now."""
        self.followed: Callable[[Job], None] | None = None
        """Told of each call a completion dispatches (a chain's next step, a catch, a
        batch callback) before it runs."""
        self.outcomes: dict[str, Outcome] = {}
        self.waiting: dict[str, str] = {}
        """Ids made into payloads and not run yet: ``pending``, ``delayed`` or
        ``waiting`` (for the calls given to ``after=``)."""
        self.batches: dict[str, MemoryBatch] = {}
        self.progress: dict[str, Progress] = {}
        """Each call's latest progress report, by id (``InlineDispatched.progress()``)."""
        self._max_bytes: int | None = None
        self._limit_read = False
        self.waits = Waits(self.outcomes, self.waiting, self._failed_unrun)
        """Calls that wait for others (``using(after=...)``): run once they have."""

    # -- dispatching --------------------------------------------------------------

    def payload(
        self, call: PendingDispatch, task_id: str | None, meta: dict[str, Any] | None
    ) -> tuple[bytes, InlineDispatched]:
        """The call's payload and its handle, as a dispatch makes them: refused as a
        dispatch would refuse it (a task in ``__main__``, an unencodable argument)."""
        task = call.task
        task.check_dispatchable()
        job = task.make_job(call.args, call.kwargs, meta, task_id=task_id or new_id())
        self.waits.note(job.id, call)
        return self.encoded(job, call.delay)

    def chain_payload(self, first_job: Job, delay: float) -> tuple[bytes, InlineDispatched]:
        return self.encoded(first_job, delay)

    def encoded(self, job: Job, delay: float) -> tuple[bytes, InlineDispatched]:
        payload = in_memory(job, self.max_bytes())
        self.waiting[job.id] = "delayed" if delay > 0 else "pending"
        return payload, InlineDispatched.of(self, job.id, job.task, job.queue)

    def open_batch(
        self, batch_id: str, spec: dict[str, Any], follows: Step | None = None
    ) -> tuple[MemoryBatch, list[bytes]]:
        """A batch in memory and its members' payloads, made as a dispatch or a worker
        makes them."""
        opened = MemoryBatch(batch_id, spec, self, follows)
        self.batches[opened.id] = opened
        return opened, opened.opened()

    def open_nested(self, batch_id: str, spec: dict[str, Any], follows: Step | None) -> list[bytes]:
        if batch_id in self.batches:  # opened before, as a worker's second open
            return []
        return self.open_batch(batch_id, spec, follows)[1]

    def count_member(self, batch_id: str, index: int, outcome: str) -> list[bytes]:
        return self.batches[batch_id].count(index, outcome)

    def max_bytes(self) -> int | None:
        """The payload size limit of the configuration (read once, from the environment)."""
        if not self._limit_read:
            self._max_bytes = Config.resolve().max_payload_bytes
            self._limit_read = True
        return self._max_bytes

    def added(self, payloads: list[bytes]) -> None:
        if self.later is not None:
            self.later(payloads)
        else:
            for payload in payloads:
                self.run(payload)

    # -- running ------------------------------------------------------------------

    def run(self, payload: bytes) -> Outcome:
        """Run one payload (see :meth:`run_now`) unless it waits for calls that have
        not run (``waiting.py``), then the calls that waited for it."""
        if self.waits.holds(payload):
            job = decode(payload)
            return self.outcomes.get(job.id) or Outcome(job.id, job.task, "waiting")
        found = self.run_now(payload)
        self.waits.release(self.run_now)
        return found

    def _failed_unrun(self, task_id: str, task: str, failure: TaskFailed) -> None:
        self.outcomes[task_id] = Outcome(task_id, task, "failed", failure=failure)

    def run_now(self, payload: bytes) -> Outcome:
        """Run one payload as a worker would, then whatever its completion makes due
        (a chain's next step, a catch, batch callbacks), each inline in turn. Its
        attempts are settled by the worker's verdicts (``rqueue.worker.verdicts``),
        with its exceptions counted in memory."""
        job = decode(payload)
        if job.id in self.outcomes:  # cancelled before its turn
            return self.outcomes[job.id]
        self.waiting.pop(job.id, None)
        task = registry.lookup(job.task)
        index = effects.check(job)
        tries = job.tries or _DEFAULTS.tries
        attempt = Attempt(0, job.queue, payload, job, math.inf, tries, _counted_in_memory(job))
        attempt.workflow, attempt.task, attempt.args = effects.involved(job), task, job.args
        if effects.is_member(job) and self.batches[job.meta[BATCH]].cancelled():
            return self._skipped(job, payload)
        if effects.is_callback(job):
            given = callbacks.given(job, None)
            if given is None:  # the batch: counted as when the callback was due
                given = self.batches[job.meta[GETS][1]]
                given.counted = callbacks.counted(job)
                if callbacks.gets_results(job):
                    attempt.args = (given.results(), *attempt.args)
            attempt.args = (given, *attempt.args)
        attempt.stack = stack_of(task.options.middleware, job)
        connection = task.connection()
        runner = Runner(connection, job.timeout or _DEFAULTS.timeout, _DEFAULTS.kill_grace)
        call = functools.partial(_call, task, attempt.args, job)
        while True:
            job.attempts += 1
            started = time.time()
            outer_job, outer_runner = current_job(), current_runner()
            set_current_job(job)
            set_runner(runner)
            sink = use_sink(self._keep_progress)
            try:
                value = run_through(attempt.stack, job, call)
                max_bytes = self.max_bytes()
                completion = effects.on_success(job, payload, value, started, max_bytes, index)
            except Exception as exc:
                settled = self._settled(attempt, verdicts.of_raised(attempt, exc), started)
                if settled is None:
                    continue  # run again at once, as a worker would once its delay is up
                return settled
            finally:
                set_current_job(outer_job)
                set_runner(outer_runner)
                reset_sink(sink)
            member = completion.member
            if member is not None and member.value is not None:  # as batch_member.lua
                refused = self.batches[member.batch_id].refused(member.member_index, member.value)
                if refused is not None:  # its batch cannot keep its value: failed for good
                    return self._failed(job, payload, refused, started)
            found = Outcome(job.id, job.task, "succeeded", value, attempts=job.attempts)
            self.outcomes[job.id] = found
            # The task's hooks, as in a worker; no events: inline runs emit none.
            HOOKS.report_succeeded(task, job, value, time.time() - started)
            self._complete(completion)
            return found

    def _keep_progress(
        self,
        queue: str,
        task_id: str,
        task: str,
        attempt: int,
        fraction: float,
        message: str | None,
    ) -> None:
        """The sink of a run's progress reports (``tasks/progress.py``): this memory."""
        self.progress[task_id] = Progress(fraction, message, time.time())

    def _settled(self, attempt: Attempt, verdict: Verdict, started: float) -> Outcome | None:
        """What an attempt that raised comes to, by the worker's verdict, kept in memory;
        None: it runs again now (a retry's backoff is not waited for, nor a task's own
        release, which uses an attempt as in a worker)."""
        job, payload = attempt.job, attempt.payload
        if isinstance(verdict, Failed):
            if retry_in(attempt, verdict) is not None:
                return None
            return self._failed(job, payload, verdict.exc, started)
        if isinstance(verdict, Released):
            if verdict.own:
                return None
            job.attempts -= 1  # a middleware's release gives its attempt back: delayed
            found = Outcome(job.id, job.task, "delayed", attempts=job.attempts)
            found.released_for = verdict.release.delay
            self.outcomes[job.id] = found
            return found
        if isinstance(verdict, Cancelled):  # its run was asked to stop: as in a worker
            return self._cancelled(job, verdict.exc)
        # Never Refused: its task was looked up and its middleware built before it ran.
        assert isinstance(verdict, Skipped), verdict
        return self._skipped(job, payload)

    def _failed(self, job: Job, payload: bytes, exc: BaseException, started: float) -> Outcome:
        kind, message = describe(exc)
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        failure = TaskFailed(job.id, kind, message, trace)
        found = Outcome(job.id, job.task, "failed", failure=failure, attempts=job.attempts)
        self.outcomes[job.id] = found
        HOOKS.report_failed(registered_task(job.task), job, exc)
        if effects.involved(job):
            limit = self.max_bytes()
            self._complete(effects.on_failure(job, payload, kind, message, trace, started, limit))
        return found

    def _cancelled(self, job: Job, exc: BaseException) -> Outcome:
        found = Outcome(job.id, job.task, "cancelled", attempts=job.attempts)
        self.outcomes[job.id] = found
        HOOKS.report_cancelled(registered_task(job.task), job, exc)
        completion = effects.on_cancel(job) if job.meta else None
        if completion is not None:
            self._complete(completion)
        return found

    def _skipped(self, job: Job, payload: bytes) -> Outcome:
        found = Outcome(job.id, job.task, "cancelled", attempts=job.attempts)
        self.outcomes[job.id] = found
        self._complete(effects.on_skip(job, payload))
        return found

    def _complete(self, completion: effects.Completion) -> None:
        """Run what a completion makes due, as a worker would push it."""
        due = []
        member = completion.member
        if member is not None:
            counted = self.batches[member.batch_id]
            index, outcome = member.member_index, member.outcome
            due += counted.count(index, outcome, member.failure, member.value)
        if completion.follower is not None:
            due.append(completion.follower.payload)
        opening = completion.opening
        if opening is not None:
            opened = continuation(opening.link, opening.meta)
            due += self.open_nested(opening.batch_id, *opened)
        for payload in due:
            if self.followed is not None:
                self.followed(decode(payload))
            self.run(payload)


class Interception:
    """What ``rqueue.tasks.interception.intercept()`` is given: every dispatch of its block, and
    (through the seams of ``Chain.dispatch`` and ``PendingBatch.dispatch``) every
    chain and batch whole. Each call becomes its payload here; :meth:`taken` says
    what happens to it then (recorded, or run at once)."""

    def __init__(self, runner: InlineRunner) -> None:
        self.runner = runner

    def taken(self, payload: bytes, call: PendingDispatch | None) -> None:
        """``call``'s payload was made (None: a callback an empty batch made due)."""
        raise NotImplementedError

    def __call__(
        self, call: PendingDispatch, task_id: str | None, meta: dict[str, Any] | None
    ) -> Dispatched:
        payload, handle = self.runner.payload(call, task_id, meta)
        self.taken(payload, call)
        return handle

    def take_chain(self, chain: Chain) -> DispatchedChain:
        first = chain.steps[0]
        handles: list[Dispatched | Batch] = []
        if isinstance(first, PendingDispatch):
            payload, handle = self.runner.chain_payload(chain.first_job(), first.delay)
            handles.append(handle)
            payloads = [payload]
        else:
            spec, follows = continuation(first.composed(None), chain.carried(None))
            opened, payloads = self.runner.open_batch(new_id(), spec, follows)
            handles.append(opened)
        for step in chain.steps[1:]:  # their ids are derived as a worker derives them
            step_id = derived_id(handles[-1].id, "next")
            if isinstance(step, PendingDispatch):
                task = step.task
                queue = task.options.queue
                handles.append(InlineDispatched.of(self.runner, step_id, task.name, queue))
            else:  # a batch opened when its turn comes
                handles.append(LaterBatch(self.runner.batches, step_id))
        for payload in payloads:
            self.taken(payload, first if isinstance(first, PendingDispatch) else None)
        return DispatchedChain(handles)

    def find_batch(self, batch_id: str) -> MemoryBatch | None:
        """The batch of that id this runner opened (``current_batch()`` inside one of
        its members), or None: one in Redis, opened elsewhere."""
        return self.runner.batches.get(batch_id)

    def take_batch(self, pending: PendingBatch) -> Batch:
        opened, payloads = self.runner.open_batch(new_id(), batch_spec(pending.composed(None)))
        calls = pending.calls
        plain = all(isinstance(call, PendingDispatch) for call in calls)
        for index, payload in enumerate(payloads):
            call = calls[index] if plain and index < len(calls) else None
            self.taken(payload, call if isinstance(call, PendingDispatch) else None)
        return opened


def _counted_in_memory(job: Job) -> Participants:
    """An attempt's participants inline: its exceptions counted in memory (one count
    per ``run``), by the worker's rule; nothing else inline keeps state."""
    if job.max_exceptions is None:
        return ()
    raised = itertools.count(1)
    return (ExceptionCount(lambda queue, job, delay: next(raised), lambda queue, job: None),)


def _call(task: Task[..., object], args: tuple[object, ...], job: Job) -> object:
    """The task's call, as a worker makes it: an ``async def`` task is awaited."""
    return awaiting.resolved(task.fn(*args, **job.kwargs))
