"""Building a batch (Laravel's ``Bus::batch``; Celery's group and chord): its members,
its callbacks, then one dispatch.

    b = batch([resize.pending(i) for i in ids]).then(notify).catch(report).dispatch()

A member is a ``pending()`` call, a chain, or a batch (shapes.py). A batch of calls
only is created, then its members pushed in one round trip per connection; one with
chains or batches among its members is opened as a worker opens a batch that is a
chain's link (nesting.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rqueue.encoding import codec
from rqueue.encoding.payload import new_id
from rqueue.store.batch_store import BatchStore
from rqueue.store.default import default_queue
from rqueue.store.queue import RedisQueue
from rqueue.tasks.definition import PendingDispatch, Task, dispatch_many
from rqueue.tasks.interception import current_interceptor
from rqueue.workflows.batch_results import RESULTS, wants_results
from rqueue.workflows.batch_status import BatchCounts
from rqueue.workflows.batches import (
    KEEP_FINISHED_MS,
    Batch,
    member_id,
    member_meta,
    push_callbacks,
)
from rqueue.workflows.nesting import open_batch
from rqueue.workflows.shapes import BATCH_STEP, batch_spec
from rqueue.workflows.steps import (
    Composite,
    Step,
    callback_call,
    callback_place,
    pending_members,
    signed,
    step_of,
)


class PendingBatch:
    """A batch being built; nothing is sent until :meth:`dispatch`."""

    def __init__(self, calls: Iterable[PendingDispatch | Composite]) -> None:
        self.calls = pending_members(calls, "batch()")
        self._callbacks: dict[str, Step] = {}
        self._name = ""
        self._allow_failures = False

    def then(
        self,
        callback: Task[Any, Any] | PendingDispatch,
        *args: Any,
        results: bool = False,
        **kwargs: Any,
    ) -> PendingBatch:
        """Run once every member succeeded. ``results=True``: called with the members'
        return values too, a list in member order, after the batch (Celery's chord)."""
        call = callback_call("then", callback, args, kwargs, 2 if results else 1)
        return self._on("then", call, results)

    def catch(
        self, callback: Task[Any, Any] | PendingDispatch, *args: Any, **kwargs: Any
    ) -> PendingBatch:
        """Run once, on the first member to fail for good."""
        return self._on("catch", callback_call("catch", callback, args, kwargs))

    def finally_(
        self,
        callback: Task[Any, Any] | PendingDispatch,
        *args: Any,
        results: bool = False,
        **kwargs: Any,
    ) -> PendingBatch:
        """Run once every member finished, succeeded, failed or skipped. ``results=True``:
        as for :meth:`then`, with None for a member that failed or was skipped."""
        call = callback_call("finally_", callback, args, kwargs, 2 if results else 1)
        return self._on("finally", call, results)

    def progress(
        self, callback: Task[Any, Any] | PendingDispatch, *args: Any, **kwargs: Any
    ) -> PendingBatch:
        """Run after each member that succeeds; ``Batch.counted`` of the batch it gets
        says how far the batch was then."""
        return self._on("progress", callback_call("progress", callback, args, kwargs))

    def allow_failures(self, allow: bool = True) -> PendingBatch:
        """Keep going after a failure (otherwise the first failure cancels the batch)."""
        self._allow_failures = allow
        return self

    def name(self, name: str) -> PendingBatch:
        self._name = name
        return self

    def _on(self, what: str, call: PendingDispatch, results: bool = False) -> PendingBatch:
        """Callbacks are tasks, called with the Batch first (and its members' results,
        with ``results``) and then ``call``'s args."""
        step = step_of(call)
        if results:
            step[RESULTS] = True
        self._callbacks[what] = step
        return self

    def wants_results(self) -> bool:
        """Whether a callback gets the members' results: they send them when counted."""
        return wants_results(self._callbacks)

    def composed(self, secret: str | None) -> Step:
        """Its batch step (shapes.py): a chain's link, or a batch's member. Its members'
        chains are signed with ``secret``; the worker that opens it signs its callbacks
        for the batch, once it has an id."""
        members = [
            call.composed(secret) if isinstance(call, Composite) else step_of(call)
            for call in self.calls
        ]
        spec = {
            "members": members,
            "name": self._name,
            "allow_failures": self._allow_failures,
            "callbacks": self._callbacks,
        }
        return {BATCH_STEP: spec}

    def dispatch(self, connection: RedisQueue | None = None) -> Batch:
        """Create the batch, then push its members; returns its handle."""
        interceptor = current_interceptor()
        if interceptor is not None:  # rqueue.testing: it takes the whole batch
            taken: Batch = interceptor.take_batch(self)
            return taken
        plain = [call for call in self.calls if isinstance(call, PendingDispatch)]
        queue = connection or (plain[0].task.connection() if plain else default_queue())
        batch_id = new_id()
        secret = queue.config.secret
        if len(plain) < len(self.calls):  # chains or batches among its members
            open_batch(queue, batch_id, batch_spec(self.composed(secret)), None)
            return Batch(batch_id, queue)
        callbacks = codec.pack(
            {
                name: signed(step, secret, callback_place(batch_id, name))
                for name, step in self._callbacks.items()
            }
        )
        queues = sorted({call.task.options.queue for call in plain})
        store = BatchStore(queue)
        store.open(
            batch_id,
            len(self.calls),
            self._name,
            self._allow_failures,
            callbacks,
            KEEP_FINISHED_MS,
            queues,
            "progress" in self._callbacks,
            results=self.wants_results(),
        )
        ids = [member_id(batch_id, index) for index in range(len(self.calls))]
        dispatch_many(plain, ids, member_meta(batch_id, self.wants_results()))
        if not self.calls:  # nothing will ever complete: then and finally are due now
            none = BatchCounts(0, 0, 0, 0)
            push_callbacks(queue, batch_id, 0, callbacks, ("then", "finally"), none)
        return Batch(batch_id, queue)


def batch(calls: Iterable[PendingDispatch | Composite]) -> PendingBatch:
    """Start building a batch of ``pending()`` calls, chains and batches; see
    :class:`PendingBatch`."""
    return PendingBatch(calls)
