"""Chains (Laravel's ``Bus::chain``; Celery's chain): run tasks one after another.

    chain(fetch.pending(url), parse.pending(), store.pending()).catch(alert).dispatch()

The first step is dispatched now and carries the rest in its payload, as in Laravel;
each step, once it succeeded, dispatches the next (effects.py), whose id is derived
from its own, so a step that runs twice dispatches its successor once. A step that
fails for good stops the chain and dispatches the ``catch`` task with the failure.
With ``pipe=True`` each step's return value is the next step's first argument.

A step may be a batch (``chain(a.pending(), batch([...]), c.pending())``): the worker
that completes the step before opens it, and the chain goes on once it finished
(nesting.py). A chain may be a batch's member (pending_batch.py).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rqueue.encoding.payload import CHAIN, KEEP, Job, encode, lane_of, new_id
from rqueue.store.default import default_queue
from rqueue.store.queue import RedisQueue
from rqueue.tasks import observers
from rqueue.tasks.definition import PendingDispatch, Task
from rqueue.tasks.handles import Dispatched
from rqueue.tasks.interception import current_interceptor
from rqueue.workflows.batches import Batch
from rqueue.workflows.nesting import continuation, open_batch
from rqueue.workflows.shapes import CHAIN_MEMBER
from rqueue.workflows.steps import (
    CATCH,
    CHAIN_CATCH,
    CHAIN_STEP,
    PIPE,
    Composite,
    Step,
    callback_call,
    check_pending,
    derived_id,
    signed,
    step_of,
)


class DispatchedChain(NamedTuple):
    """The handles of a chain's steps, as dispatched (steps added while it runs are not
    among them): a ``Dispatched`` per task, a ``Batch`` per batch. ``result()`` waits
    for the last one, which must be a task that keeps its result."""

    steps: list[Dispatched | Batch]

    def status(self) -> list[str]:
        """Each step's status; a batch's reads ``unknown`` until it is opened, then
        ``running``, ``succeeded``, ``failed`` (a member failed) or ``cancelled``."""
        return [_status(step) for step in self.steps]

    def result(self, timeout: float | None = None) -> Any:
        last = self.steps[-1]
        if isinstance(last, Batch):
            raise TypeError("the chain ends with a batch: read its status() instead")
        return last.result(timeout)


def _status(step: Dispatched | Batch) -> str:
    if isinstance(step, Dispatched):
        return step.status()
    status = step.status()
    if status is None or status.unreadable is not None:
        return "unknown"
    if status.finished_at is None:
        return "running"
    if status.cancelled_at is not None:
        return "failed" if status.failed else "cancelled"
    return "failed" if status.failed else "succeeded"


class Chain:
    """A chain being built; nothing is sent until :meth:`dispatch`."""

    def __init__(self, steps: tuple[PendingDispatch | Composite, ...], pipe: bool) -> None:
        if not steps:
            raise ValueError("a chain needs at least one step")
        for index, step in enumerate(steps):
            if isinstance(step, Chain):
                raise TypeError("a chain's step cannot be a chain: list its steps in this one")
            if isinstance(step, Composite):  # a batch: its members were checked
                if pipe:
                    raise TypeError(
                        "chain(pipe=True) cannot have a batch as a step: a batch takes no "
                        "value and gives none; read results inside the steps instead"
                    )
                continue
            check_pending(step, "chain()")
            # The first step runs as it is; with pipe=True each later one gets the
            # return value of the step before it first.
            step.task.check_call(step.args, step.kwargs, given=int(pipe and index > 0))
        self.steps = steps
        self.pipe = pipe
        self._catch: PendingDispatch | None = None

    def catch(self, callback: Task[Any, Any] | PendingDispatch, *args: Any, **kwargs: Any) -> Chain:
        """Dispatch ``callback`` if a step fails for good; it gets the failure (a
        ``TaskFailed``) as its first argument, then ``args`` and ``kwargs``."""
        self._catch = callback_call("catch", callback, args, kwargs)
        return self

    def first_job(self, secret: str | None = None) -> Job:
        """The first step's job: it carries the rest of the chain in its ``meta``, each
        step signed with ``secret`` (``RQUEUE_SECRET``) for the worker that will
        dispatch it (run inline, by ``rqueue.testing``, nothing needs signing).
        TypeError if the first step is a batch (see :meth:`dispatch`)."""
        first = self.steps[0]
        if not isinstance(first, PendingDispatch):
            raise TypeError("this chain starts with a batch: it has no first job")
        first.task.check_dispatchable()
        return first.task.make_job(first.args, first.kwargs, self.carried(secret))

    def carried(self, secret: str | None) -> dict[str, Any]:
        """The meta the first step carries: the other steps, the catch, pipe."""
        meta: dict[str, Any] = {}
        if len(self.steps) > 1:
            meta[CHAIN] = [_link(step, secret) for step in self.steps[1:]]
        if self._catch is not None:
            meta[CATCH] = signed(step_of(self._catch), secret, CHAIN_CATCH)
        if self.pipe:
            meta[PIPE] = True
        return meta

    def composed(self, secret: str | None) -> Step:
        """The chain as a batch's member (shapes.py), its steps signed with ``secret``."""
        catch = None
        if self._catch is not None:
            catch = signed(step_of(self._catch), secret, CHAIN_CATCH)
        links = [_link(step, secret) for step in self.steps]
        return {CHAIN_MEMBER: links, "catch": catch, "pipe": self.pipe}

    def dispatch(self) -> DispatchedChain:
        interceptor = current_interceptor()
        if interceptor is not None:  # rqueue.testing: it takes the whole chain
            taken: DispatchedChain = interceptor.take_chain(self)
            return taken
        first = self.steps[0]
        if not isinstance(first, PendingDispatch):
            return self._open_first(first)
        task = first.task
        queue = task.connection()
        job = self.first_job(queue.config.secret)

        def push(job: Job) -> None:
            queue.push(
                job.queue,
                [encode(job, queue.config.max_payload_bytes, queue.config.keyring)],
                round(first.delay * 1000),
                task.options.wait_replicas,
                frozenset([job.id] if KEEP in job.meta else []),
                task.keep_ms,
                lane=lane_of(job.meta),
            )

        if observers.watching:  # tracing: the chain's trace starts with this send
            sending = observers.Sending.of([job])
            observers.sent(sending, lambda: push(sending.onto(job)))
        else:
            push(job)
        return self._handles(Dispatched(job.id, job.task, job.queue, queue), queue)

    def _open_first(self, first: Composite) -> DispatchedChain:
        """Dispatch a chain whose first step is a batch: open it now, with the rest of
        the chain as what follows it."""
        queue = default_queue()
        secret = queue.config.secret
        batch_id = new_id()
        open_batch(queue, batch_id, *continuation(first.composed(secret), self.carried(secret)))
        return self._handles(Batch(batch_id, queue), queue)

    def _handles(self, first: Dispatched | Batch, queue: RedisQueue) -> DispatchedChain:
        """Every step's handle, each id derived from the one before (as a worker does)."""
        handles = [first]
        for step in self.steps[1:]:
            step_id = derived_id(handles[-1].id, "next")
            if isinstance(step, PendingDispatch):
                task = step.task
                handles.append(
                    Dispatched(step_id, task.name, task.options.queue, task.connection())
                )
            else:
                handles.append(Batch(step_id, queue))
        return DispatchedChain(handles)


def _link(step: PendingDispatch | Composite, secret: str | None) -> Step:
    """A step after the first, as the chain carries it: signed, as a worker that pushes
    or opens it will check."""
    body = step_of(step) if isinstance(step, PendingDispatch) else step.composed(secret)
    return signed(body, secret, CHAIN_STEP)


def chain(*steps: PendingDispatch | Composite, pipe: bool = False) -> Chain:
    """Build a chain of ``pending()`` calls and batches; see :class:`Chain`."""
    return Chain(steps, pipe)
