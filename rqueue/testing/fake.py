"""``fake()``: dispatches are recorded instead of sent (Laravel's ``Queue::fake()``).

Each dispatch still becomes its payload (the real encoding: an argument msgpack
cannot carry fails here as it would for real), and is kept with the call it came
from, for the ``assert_*`` methods; ``run_all()`` then runs what was recorded,
inline and in order (``inline.py``). A chain or a batch is recorded whole as well:
a chain's first step and a batch's members count as dispatched, as they are pushed
at once for real; a chain's later steps are dispatched only when ``run_all()``
reaches them.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import rqueue.tasks.registry as registry
from rqueue.encoding.payload import Job
from rqueue.errors import TaskNotRegistered
from rqueue.tasks.decorator import registered
from rqueue.tasks.definition import PendingDispatch, Task
from rqueue.tasks.interception import intercept
from rqueue.testing.inline import InlineRunner, Interception, Outcome
from rqueue.workflows.batches import Batch
from rqueue.workflows.chains import Chain, DispatchedChain
from rqueue.workflows.pending_batch import PendingBatch

TaskRef = Task[Any, Any] | str
"""A task, or its name (``module:function``)."""
Shape = TaskRef | PendingDispatch | list[Any] | tuple[Any, ...]
"""What a chain's step or a batch's member is expected to be: a task (any arguments), a
``pending()`` call (these arguments), a list (a batch of members of these shapes) or
a tuple (a chain of steps of these shapes)."""
Where = Callable[[PendingDispatch], object]
"""Called with each recorded call (``call.args``, ``call.kwargs``, ``call.delay``,
``call.task.options.queue``): keep those for which it returns a true value."""


class Fake(Interception):
    """What ``fake()`` yields: the recorded dispatches, assertions on them, and
    ``run_all()``."""

    def __init__(self) -> None:
        super().__init__(InlineRunner(later=self._due_later))
        self.calls: list[PendingDispatch] = []
        """Every call dispatched, in order."""
        self.chains: list[Chain] = []
        self.batches: list[PendingBatch] = []
        self._due: deque[bytes] = deque()
        self.runner.followed = self._followed

    # -- recording ----------------------------------------------------------------

    def taken(self, payload: bytes, call: PendingDispatch | None) -> None:
        if call is not None:
            self.calls.append(call)
        self._due.append(payload)

    def take_chain(self, chain: Chain) -> DispatchedChain:
        handles = super().take_chain(chain)
        self.chains.append(chain)
        return handles

    def take_batch(self, pending: PendingBatch) -> Batch:
        opened = super().take_batch(pending)
        self.batches.append(pending)
        return opened

    def _followed(self, job: Job) -> None:
        self.calls.append(PendingDispatch(registry.lookup(job.task), job.args, job.kwargs))

    def _due_later(self, payloads: list[bytes]) -> None:
        self._due.extend(payloads)

    # -- running ------------------------------------------------------------------

    def run_all(self) -> list[Outcome]:
        """Run every recorded call not run yet, in order, and what running them
        dispatches, until nothing is left; each call's outcome, in the order they ran.

        A chain runs step by step (each step's result piped to the next with
        ``pipe=True``; its catch on a failure); a batch's callbacks run when its
        members make them due, with an in-memory stand-in of the batch first.
        """
        before = len(self.runner.outcomes)
        while self._due:
            self.runner.run(self._due.popleft())
        return list(self.runner.outcomes.values())[before:]

    # -- reading ------------------------------------------------------------------

    def dispatched(self, task: TaskRef, where: Where | None = None) -> list[PendingDispatch]:
        """The recorded calls of ``task`` (that ``where`` keeps), in dispatch order."""
        name = _name(task)
        return [c for c in self.calls if c.task.name == name and (where is None or where(c))]

    # -- assertions -----------------------------------------------------------------

    def assert_dispatched(
        self, task: TaskRef, times: int | None = None, where: Where | None = None
    ) -> None:
        """``task`` was dispatched (exactly ``times`` times, if given; counting the
        calls ``where`` keeps, if given)."""
        found = len(self.dispatched(task, where))
        if found == 0 if times is None else found != times:
            wanted = "at least once" if times is None else f"{times} time(s)"
            matching = " matching where=" if where is not None else ""
            raise AssertionError(
                f"expected {_name(task)} dispatched {wanted}{matching}, got {found}; "
                + self._listing()
            )

    def assert_not_dispatched(self, task: TaskRef, where: Where | None = None) -> None:
        found = self.dispatched(task, where)
        if found:
            matching = " matching where=" if where is not None else ""
            raise AssertionError(
                f"expected {_name(task)} not dispatched{matching}, got {len(found)}; "
                + self._listing()
            )

    def assert_dispatched_on(self, queue: str, task: TaskRef) -> None:
        """``task`` was dispatched at least once to ``queue``."""
        if not self.dispatched(task, lambda call: call.task.options.queue == queue):
            raise AssertionError(
                f"expected {_name(task)} dispatched on {queue!r}; " + self._listing()
            )

    def assert_nothing_dispatched(self) -> None:
        if self.calls or self.batches:
            raise AssertionError("expected nothing dispatched; " + self._listing())

    def assert_chained(self, steps: list[Shape]) -> None:
        """A chain was dispatched with these steps, in order: each a task (any
        arguments), a ``pending()`` call (these arguments), or a list for a batch, whose
        members are shapes too (a tuple for a chain):
        ``assert_chained([fetch, [resize, (crop, upload)], store])``."""
        for step in steps:
            _check_shape(step)
        for chain in self.chains:
            if _all_same(chain.steps, steps):
                return
        shown = ", ".join(_shown_step(step) for step in steps)
        chains = "\n".join("  - " + _call(chain) for chain in self.chains)
        raise AssertionError(
            f"expected a chain of [{shown}]; "
            + (f"chains dispatched:\n{chains}" if chains else "no chain was dispatched")
        )

    def assert_batched(self, where: Callable[[PendingBatch], object]) -> None:
        """A batch was dispatched for which ``where(pending_batch)`` is true; it reads
        ``.calls`` (its members' ``pending()`` calls), ``.name()``-given name and
        callbacks as :class:`PendingBatch` holds them."""
        if not any(where(pending) for pending in self.batches):
            batches = "\n".join(
                f"  - batch {pending._name!r} of " + ", ".join(map(_call, pending.calls))
                for pending in self.batches
            )
            raise AssertionError(
                "expected a batch matching where=; "
                + (f"batches dispatched:\n{batches}" if batches else "no batch was dispatched")
            )

    def _listing(self) -> str:
        if not self.calls:
            return "nothing was dispatched"
        lines = [f"  - {_call(call)} on {call.task.options.queue!r}" for call in self.calls]
        return "dispatched:\n" + "\n".join(lines)


@contextmanager
def fake() -> Iterator[Fake]:
    """Record the dispatches of this block instead of sending them, until it ends
    (the pytest fixture ``rqueue_fake`` is this): its own, and those of threads it
    starts (docs/testing.md, "Threads and concurrent tests")."""
    recorder = Fake()
    with intercept(recorder):
        yield recorder


def _name(task: TaskRef) -> str:
    """The task's name; TaskNotRegistered for a name no task of this process has, with
    the names closest to it: a typo would otherwise make ``assert_not_dispatched``
    pass for ever."""
    if not isinstance(task, str):
        return task.name
    known = registered()
    if task not in known:
        close = difflib.get_close_matches(task, known, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise TaskNotRegistered(
            f"no task is named {task!r} in this process (is its module imported?){hint}"
        )
    return task


def _check_shape(wanted: Shape) -> None:
    """TaskNotRegistered for a task name in ``wanted`` no task of this process has."""
    if isinstance(wanted, PendingDispatch):  # a named tuple: before tuples
        return
    if isinstance(wanted, (list, tuple)):
        for inner in wanted:
            _check_shape(inner)
    else:
        _name(wanted)


def _same(step: object, wanted: Shape) -> bool:
    if isinstance(wanted, list):
        return isinstance(step, PendingBatch) and _all_same(step.calls, wanted)
    if isinstance(wanted, tuple) and not isinstance(wanted, PendingDispatch):
        return isinstance(step, Chain) and _all_same(step.steps, wanted)
    if not isinstance(step, PendingDispatch):
        return False
    if isinstance(wanted, PendingDispatch):
        return (step.task.name, step.args, step.kwargs) == (
            wanted.task.name,
            wanted.args,
            wanted.kwargs,
        )
    return step.task.name == _name(wanted)


def _all_same(steps: Sequence[object], wanted: Sequence[Shape]) -> bool:
    return len(steps) == len(wanted) and all(map(_same, steps, wanted))


def _call(call: object) -> str:
    """A call, chain or batch as a test failure shows it."""
    if isinstance(call, Chain):
        return "chain(" + ", ".join(map(_call, call.steps)) + ")"
    if isinstance(call, PendingBatch):
        return "batch([" + ", ".join(map(_call, call.calls)) + "])"
    if not isinstance(call, PendingDispatch):
        return repr(call)
    arguments = [repr(a) for a in call.args] + [f"{k}={v!r}" for k, v in call.kwargs.items()]
    return f"{call.task.name}({', '.join(arguments)})"


def _shown_step(step: Shape) -> str:
    if isinstance(step, list):
        return "[" + ", ".join(map(_shown_step, step)) + "]"
    if isinstance(step, tuple) and not isinstance(step, PendingDispatch):
        return "(" + ", ".join(map(_shown_step, step)) + ")"
    return _call(step) if isinstance(step, PendingDispatch) else _name(step)
