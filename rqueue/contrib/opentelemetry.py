"""OpenTelemetry: a span for each send and each attempt, the trace carried in the payload.

    pip install 'rqueue[otel]'

    from rqueue.contrib.opentelemetry import instrument
    instrument()                # a producing process (a web app), once its SDK is set up

    rqueue work --otel          # or RQUEUE_OTEL=1: every worker child, after its fork

Spans follow the OpenTelemetry messaging semantic conventions. Each send is a
``send <queue>`` span (PRODUCER) around the encoding and push of its tasks (one span
for a ``dispatch_many`` or a batch's members), and its context travels in each task's
payload (``Job.headers``: ``traceparent``, ``tracestate``, by the process's global
propagator). Each attempt is a ``process <queue>`` span (CONSUMER) from the task's
call until its outcome is settled, current while its function runs (in its thread or
coroutine, in every mode), the child of the send span, or with ``link=True`` the root
of a new trace linking to it. Its attributes:
``messaging.system`` ``rqueue``, ``messaging.destination.name`` (the queue),
``messaging.message.id`` (the task id), ``messaging.operation.type`` (``send`` or
``process``), ``messaging.rqueue.task`` and ``messaging.rqueue.attempt``; an exception
is recorded and sets the status to ERROR (a ``Release`` is no error).
What an attempt sends, its function's dispatches and, once it completed, its chain's
next step, catch or its batch's callbacks, continue its trace as children of its
process span.

The spans go wherever the process's tracer provider sends them: set the SDK up where
the process starts (for a worker, in its ``-A`` module or a task module; the SDK's
span processors restart their threads after a fork). ``instrument`` makes no thread
and keeps nothing that a fork breaks, so ``--otel`` instruments the worker's parent
too (a schedule's trigger is sent from there) and each child again after its fork.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, Tracer, TracerProvider
from opentelemetry.util.types import AnyValue

from rqueue.encoding.payload import Job
from rqueue.middleware.base import Release
from rqueue.tasks import observers
from rqueue.tasks.current import current_job
from rqueue.worker import participants
from rqueue.worker.attempt import Participant

SYSTEM = "rqueue"
_REMEMBERED = 1024
"""Process spans kept open until their attempt's outcome (see ``_Processing``); past
this many (attempts whose outcome never came), the oldest are dropped unended."""


class _Processing(Participant):
    """The consumer side: a ``process`` span from each call until its outcome."""

    __slots__ = ("_lock", "_spans", "link", "tracer")

    def __init__(self, tracer: Tracer, link: bool) -> None:
        self.tracer = tracer
        self.link = link
        self._spans: dict[str, trace.Span] = {}
        """Per task id, the process span of its attempt, from its call until its outcome
        is settled, when it ends: a chain's next step or a batch's callback is sent after
        the call, while its attempt completes, and continues its trace from here."""
        self._lock = threading.Lock()

    def call_scope(self, queue: str, job: Job) -> _ProcessSpan:
        carried = propagate.extract(job.headers) if job.headers else None
        parent: context.Context | None = carried
        links: tuple[Link, ...] = ()
        if self.link and carried is not None:
            sent = trace.get_current_span(carried).get_span_context()
            parent, links = None, ((Link(sent),) if sent.is_valid else ())
        attributes: dict[str, AnyValue] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": queue,
            "messaging.message.id": job.id,
            "messaging.rqueue.task": job.task,
            "messaging.rqueue.attempt": job.attempts,
        }
        span = self.tracer.start_span(
            f"process {queue}", parent, SpanKind.CONSUMER, attributes, links
        )
        with self._lock:
            if len(self._spans) >= _REMEMBERED:
                del self._spans[next(iter(self._spans))]
            self._spans[job.id] = span
        return _ProcessSpan(self, job, span)

    def attempt_span(self, job_id: str) -> trace.Span | None:
        """The process span of the attempt at ``job_id`` still completing, if any."""
        return self._spans.get(job_id)

    def end(self, job: Job | None) -> None:
        """End the process span of ``job``'s attempt, its outcome settled (its chain's
        next step, its batch's callbacks sent)."""
        if job is not None:
            with self._lock:
                span = self._spans.pop(job.id, None)
            if span is not None:
                span.end()

    def after_succeeded(self, queue: str, job: Job, duration: float) -> None:
        self.end(job)

    def after_retried(self, queue: str, job: Job, duration: float | None) -> None:
        self.end(job)

    def after_failed(self, queue: str, job: Job | None, duration: float | None) -> None:
        self.end(job)


class _ProcessSpan:
    """An attempt's process span made current while its function runs (a class, not a
    generator: it is entered once per attempt). It ends once the attempt's outcome is
    settled (``_Processing.end``), or here if the task raised ``Release`` (put itself
    back): no outcome hook follows that one."""

    __slots__ = ("job", "processing", "span", "token")

    def __init__(self, processing: _Processing, job: Job, span: trace.Span) -> None:
        self.processing = processing
        self.job = job
        self.span = span
        self.token: object = None

    def __enter__(self) -> None:
        self.token = context.attach(trace.set_span_in_context(self.span))

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        context.detach(self.token)  # type: ignore[arg-type]
        if isinstance(exc, Release):  # not an error of the task
            self.processing.end(self.job)
        elif exc is not None:
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


class _Sending:
    """The producer side: a ``send`` span around each send, its context injected."""

    def __init__(self, tracer: Tracer, processing: _Processing) -> None:
        self.tracer = tracer
        self.processing = processing

    @contextmanager
    def __call__(self, sending: observers.Sending) -> Iterator[None]:
        attributes: dict[str, AnyValue] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
        }
        if sending.queue is not None:
            attributes["messaging.destination.name"] = sending.queue
        if len(sending.ids) == 1:
            attributes["messaging.message.id"] = sending.ids[0]
        else:
            attributes["messaging.batch.message_count"] = len(sending.ids)
        if sending.task is not None:
            attributes["messaging.rqueue.task"] = sending.task
        name = "send" if sending.queue is None else f"send {sending.queue}"
        with self.tracer.start_as_current_span(name, self._parent(), SpanKind.PRODUCER, attributes):
            propagate.inject(sending.headers)
            yield

    def _parent(self) -> context.Context | None:
        """The current context; or, while a worker completes an attempt (its call over,
        no span current), its process span's: what it sends continues its trace."""
        if trace.get_current_span().get_span_context().is_valid:
            return None
        job = current_job()
        span = None if job is None else self.processing.attempt_span(job.id)
        return None if span is None else trace.set_span_in_context(span)


_installed: tuple[_Sending, _Processing] | None = None


def instrument(tracer_provider: TracerProvider | None = None, link: bool = False) -> None:
    """Trace this process's sends and, in a worker, its attempts (see the module's
    docstring). Idempotent: a second call changes nothing (``uninstrument`` first to
    change ``tracer_provider`` or ``link``). ``tracer_provider``: the global one by
    default, found when the first span starts, so the SDK may be set up later (in a
    task module, say)."""
    global _installed
    if _installed is not None:
        return
    tracer = trace.get_tracer("rqueue", tracer_provider=tracer_provider)
    processing = _Processing(tracer, link)
    sending = _Sending(tracer, processing)
    observers.observe(sending)
    participants.join(processing)
    _installed = (sending, processing)


def uninstrument() -> None:
    """Undo :func:`instrument` (a worker child built already keeps its participant)."""
    global _installed
    if _installed is None:
        return
    sending, processing = _installed
    observers.unobserve(sending)
    participants.leave(processing)
    _installed = None
