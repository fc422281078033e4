"""Observers of every send: where tracing hangs off the producing side.

Every path that makes a task passes here before its payload is encoded: a dispatch
(``dispatch``, ``later``, ``dispatch_many``, a batch's members, ``Batch.add``), a
chain's first step, a chain's next step or catch and a batch's callbacks (pushed by
the worker that completes a task, ``workflows/effects.py`` and ``batches.py``), and a
schedule's trigger (``schedules/``). An observer (OpenTelemetry's or Sentry's, in
``rqueue/contrib/``) is given a :class:`Sending` and returns a context manager that
the encoding and push run in (a span around them); it may add ``headers`` (a trace's
context), which each task of the send carries in its payload (``Job.headers``) for
the worker's side to continue from (``worker/attempt.py``'s ``call_scope``).

With none registered a send pays one test of the empty :data:`watching` tuple. The
registry is process-wide, as the tracing SDKs it serves are: a process instruments
itself once (``rqueue.contrib.opentelemetry.instrument()``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, ExitStack
from typing import TypeVar

from rqueue.encoding.payload import Job, encode
from rqueue.encoding.sealing import Keyring

T = TypeVar("T")


class Sending:
    """One send, as its observers see it before it is encoded: the queue and task of
    its calls (None when they are several), their ids, and the headers observers add."""

    __slots__ = ("headers", "ids", "queue", "task")

    def __init__(self, queues: Iterable[str], tasks: Iterable[str], ids: Sequence[str]) -> None:
        self.queue = _one(queues)
        """The queue every call goes to; None if they go to several."""
        self.task = _one(tasks)
        """The task every call is of; None if they are of several."""
        self.ids = ids
        """The calls' task ids (a message id each)."""
        self.headers: dict[str, str] = {}
        """What the observers add (``traceparent``, ``sentry-trace``, ...): every call
        of this send carries it in its payload."""

    @classmethod
    def of(cls, jobs: Sequence[Job]) -> Sending:
        return cls({job.queue for job in jobs}, {job.task for job in jobs}, [j.id for j in jobs])

    def onto(self, job: Job) -> Job:
        """``job``, carrying the headers the observers added (none: as it was)."""
        if self.headers:
            job.headers = {**(job.headers or {}), **self.headers}
        return job


SendObserver = Callable[[Sending], AbstractContextManager[object]]
"""Called as a send starts; the context it returns is left once the send is done,
with the exception that ended it, if any."""

watching: tuple[SendObserver, ...] = ()
"""The registered observers, in the order they were registered: test it before making
a :class:`Sending` (the plain path is one test of this empty tuple)."""


def observe(observer: SendObserver) -> None:
    """Register ``observer`` for every send of this process (once: again is a no-op)."""
    global watching
    if observer not in watching:
        watching = (*watching, observer)


def unobserve(observer: SendObserver) -> None:
    """Stop ``observer`` observing (not registered: nothing happens)."""
    global watching
    watching = tuple(o for o in watching if o != observer)


def sent(sending: Sending, send: Callable[[], T]) -> T:
    """``send()`` within every observer's context; ``send`` encodes its jobs through
    ``sending.onto`` (the observers have added their headers by then)."""
    with ExitStack() as contexts:
        for observer in watching:
            contexts.enter_context(observer(sending))
        return send()


def encoded(job: Job, max_bytes: int | None, keyring: Keyring | None) -> bytes:
    """``encode(job)``, observed if any observer is registered: for the sends whose
    push comes later together with other changes (a worker's completion, a schedule's
    firing, a batch's members), so the observers' context is around the encoding."""
    if not watching:
        return encode(job, max_bytes, keyring)
    sending = Sending.of([job])
    return sent(sending, lambda: encode(sending.onto(job), max_bytes, keyring))


def _one(names: Iterable[str]) -> str | None:
    found = set(names)
    return found.pop() if len(found) == 1 else None
