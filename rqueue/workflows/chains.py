"""Chains (Laravel's ``Bus::chain``; Celery's chain): run tasks one after another.

    chain(fetch.pending(url), parse.pending(), store.pending()).catch(alert).dispatch()

The first step is dispatched now and carries the rest in its payload, as in Laravel;
each step, once it succeeded, dispatches the next (effects.py), whose id is derived
from its own, so a step that runs twice dispatches its successor once. A step that
fails for good stops the chain and dispatches the ``catch`` task with the failure.
With ``pipe=True`` each step's return value is the next step's first argument.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rqueue.encoding.payload import CHAIN, KEEP, Job, encode
from rqueue.tasks import observers
from rqueue.tasks.definition import PendingDispatch, Task
from rqueue.tasks.handles import Dispatched
from rqueue.tasks.interception import current_interceptor
from rqueue.workflows.effects import CATCH, PIPE
from rqueue.workflows.steps import (
    CHAIN_CATCH,
    CHAIN_STEP,
    callback_call,
    check_pending,
    derived_id,
    signed,
    step_of,
)


class DispatchedChain(NamedTuple):
    """The handles of a chain's steps, as dispatched (steps added while it runs are not
    among them); ``result()`` waits for the last one, which must keep its result."""

    steps: list[Dispatched]

    def status(self) -> list[str]:
        return [step.status() for step in self.steps]

    def result(self, timeout: float | None = None) -> Any:
        return self.steps[-1].result(timeout)


class Chain:
    """A chain being built; nothing is sent until :meth:`dispatch`."""

    def __init__(self, steps: tuple[PendingDispatch, ...], pipe: bool) -> None:
        if not steps:
            raise ValueError("a chain needs at least one step")
        for index, step in enumerate(steps):
            check_pending(step, "chain()")
            # The first step runs as it is; with pipe=True each later one gets the
            # return value of the step before it first.
            step.task.check_call(step.args, step.kwargs, given_first=pipe and index > 0)
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
        dispatch it (run inline, by ``rqueue.testing``, nothing needs signing)."""
        first, rest = self.steps[0], self.steps[1:]
        meta: dict[str, Any] = {}
        if rest:
            meta[CHAIN] = [signed(step_of(step), secret, CHAIN_STEP) for step in rest]
        if self._catch is not None:
            meta[CATCH] = signed(step_of(self._catch), secret, CHAIN_CATCH)
        if self.pipe:
            meta[PIPE] = True
        first.task.check_dispatchable()
        return first.task.make_job(first.args, first.kwargs, meta)

    def dispatch(self) -> DispatchedChain:
        interceptor = current_interceptor()
        if interceptor is not None:  # rqueue.testing: it takes the whole chain
            taken: DispatchedChain = interceptor.take_chain(self)
            return taken
        first, rest = self.steps[0], self.steps[1:]
        task = first.task
        queue = task.connection()
        job = self.first_job(queue.config.secret)

        def push(job: Job) -> None:
            queue.push(
                job.queue,
                [encode(job, queue.config.max_payload_bytes)],
                round(first.delay * 1000),
                task.options.wait_replicas,
                frozenset([job.id] if KEEP in job.meta else []),
                task.keep_ms,
            )

        if observers.watching:  # tracing: the chain's trace starts with this send
            sending = observers.Sending.of([job])
            observers.sent(sending, lambda: push(sending.onto(job)))
        else:
            push(job)
        handles = [Dispatched(job.id, job.task, job.queue, queue)]
        for step in rest:
            step_id = derived_id(handles[-1].id, "next")
            handles.append(
                Dispatched(step_id, step.task.name, step.task.options.queue, step.task.connection())
            )
        return DispatchedChain(handles)


def chain(*steps: PendingDispatch, pipe: bool = False) -> Chain:
    """Build a chain of ``pending()`` calls; see :class:`Chain`."""
    return Chain(steps, pipe)
