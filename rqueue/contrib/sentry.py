"""Sentry: a task's final failure as one event, spans for sends and attempts, and cron
check-ins for schedules.

    pip install 'rqueue[sentry]'

    import sentry_sdk
    from rqueue.contrib.sentry import RqueueIntegration

    sentry_sdk.init(dsn=..., traces_sample_rate=1.0, integrations=[RqueueIntegration()])

In a producing process, call ``sentry_sdk.init`` where the app starts. In a worker,
as with Celery's integration, call it where the worker loads the app before it forks:
a module given with ``-A`` (``rqueue work -A myapp.worker``). The SDK survives the fork
(its transport's thread starts again in each child), and every child's attempts are
traced from its first.

**Failures.** A task that fails for good is captured once, with the exception that
ended its last attempt, in the scope of that attempt (its breadcrumbs and trace), with
the tags ``rqueue.queue`` and ``rqueue.task`` and an ``rqueue`` context: queue, task,
id, attempt, and its arguments (``[Filtered]`` unless ``send_default_pii``, and so
are the locals of its function's frame, where its arguments are). rqueue's
own log line for that failure is kept from becoming a second event through Sentry's
logging integration (the line stays a breadcrumb). A retried attempt is captured only
with ``capture_retries=True``. A payload refused before it ran has no exception: its
error log line is its event.

**Tracing.** Each send is a ``queue.publish`` span (within the current transaction,
if any), each attempt a ``queue.process`` transaction named for its task, continued
from the ``sentry-trace`` and ``baggage`` its payload carries; both with the
``messaging.*`` data. What an attempt sends once its call is over (a chain's next
step, a batch's callback) is a span of its transaction too.

**Crons.** With ``monitor_schedules=True``, each run of a schedule reports check-ins
(in progress, then ok or error) to the monitor named for the schedule (its slug),
with the schedule's cron or interval as the monitor's config, so Sentry creates the
monitor at its first check-in, as Celery Beat's integration does.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sentry_sdk
from sentry_sdk._types import SENSITIVE_DATA_SUBSTITUTE

try:
    from sentry_sdk.consts import OP, SPANDATA, SPANSTATUS
except ImportError:  # 3.0 replaced transactions with OpenTelemetry's spans
    raise ImportError(
        f"rqueue.contrib.sentry works with sentry-sdk 2.x, and {sentry_sdk.VERSION} is "
        "installed: pip install 'rqueue[sentry]' (sentry-sdk>=2.0,<3)"
    ) from None
from sentry_sdk.crons import MonitorStatus, capture_checkin
from sentry_sdk.integrations import Integration
from sentry_sdk.scope import (
    add_global_event_processor,
    should_send_default_pii,
    use_isolation_scope,
)
from sentry_sdk.tracing import BAGGAGE_HEADER_NAME, SENTRY_TRACE_HEADER_NAME, TransactionSource
from sentry_sdk.utils import event_from_exception

from rqueue.encoding.payload import Job
from rqueue.errors import RQueueError
from rqueue.middleware.base import Release
from rqueue.schedules.api import Schedules
from rqueue.tasks import observers
from rqueue.tasks.current import current_job, current_runner
from rqueue.worker import participants
from rqueue.worker.attempt import Participant

if TYPE_CHECKING:
    from sentry_sdk._types import MonitorConfig

SYSTEM = "rqueue"
_WORKER_LOGGER = "rqueue.worker"
_REMEMBERED = 1024
"""Attempts kept between their call and their outcome (see ``_Processing``); past this
many (attempts whose outcome never came), the oldest are dropped unfinished."""
_CARRIED = (SENTRY_TRACE_HEADER_NAME, BAGGAGE_HEADER_NAME)


class RqueueIntegration(Integration):
    """rqueue for ``sentry_sdk.init(integrations=[...])``; see the module's docstring.

    ``capture_retries``: capture an attempt that failed and is retried, too (as a
    warning). ``monitor_schedules``: report each schedule's runs as cron check-ins."""

    identifier = "rqueue"
    origin = f"auto.queue.{identifier}"

    def __init__(self, capture_retries: bool = False, monitor_schedules: bool = False) -> None:
        self.capture_retries = capture_retries
        self.monitor_schedules = monitor_schedules

    @staticmethod
    def setup_once() -> None:
        observers.observe(_publish)
        participants.join(_PROCESSING)
        add_global_event_processor(_without_outcome_lines)


def _integration() -> RqueueIntegration | None:
    return sentry_sdk.get_client().get_integration(RqueueIntegration)


@dataclass
class _Attempt:
    """What an attempt's outcome is reported with: its scope, transaction, exception."""

    scope: sentry_sdk.Scope
    transaction: sentry_sdk.tracing.Transaction
    check_in: tuple[str, str] | None
    """(monitor slug, check-in id) of its schedule's run, when monitored."""
    exc: BaseException | None = None


class _Processing(Participant):
    """The worker's side: a transaction from each call until its outcome, reported then."""

    __slots__ = ("_attempts", "_configs", "_lock")

    def __init__(self) -> None:
        self._attempts: dict[str, _Attempt] = {}
        """Per task id, its attempt from its call until its outcome is settled."""
        self._configs: dict[str, MonitorConfig | None] = {}
        """Per schedule name, its monitor config, read once per process."""
        self._lock = threading.Lock()

    def call_scope(self, queue: str, job: Job) -> Any:
        integration = _integration()
        return None if integration is None else self._process(integration, queue, job)

    @contextmanager
    def _process(self, integration: RqueueIntegration, queue: str, job: Job) -> Iterator[None]:
        with sentry_sdk.isolation_scope() as scope:
            scope.clear_breadcrumbs()
            scope.set_tag("rqueue.queue", queue)
            scope.set_tag("rqueue.task", job.task)
            scope.set_context("rqueue", _described(queue, job))
            headers = job.headers or {}
            carried = {name: headers[name] for name in _CARRIED if name in headers}
            transaction = sentry_sdk.continue_trace(
                carried,
                op=OP.QUEUE_PROCESS,
                name=job.task,
                source=TransactionSource.TASK,
                origin=RqueueIntegration.origin,
            )
            check_in = self._check_in(job) if integration.monitor_schedules else None
            sentry_sdk.start_transaction(transaction)  # finished with the outcome: _finish
            _messaging(transaction, queue, job.id)
            transaction.set_data(SPANDATA.MESSAGING_MESSAGE_RETRY_COUNT, job.attempts - 1)
            attempt = _Attempt(scope, transaction, check_in)
            with self._lock:
                if len(self._attempts) >= _REMEMBERED:
                    del self._attempts[next(iter(self._attempts))]
                self._attempts[job.id] = attempt
            current = sentry_sdk.get_current_scope()
            previous, current.span = current.span, transaction
            try:
                yield
            except Release:  # the task put itself back: not a failure, and no outcome follows
                transaction.set_status(SPANSTATUS.OK)
                self._settled(job)
                _finish(attempt)
                raise
            except BaseException as exc:  # TaskTimeout too
                attempt.exc = exc
                transaction.set_status(SPANSTATUS.INTERNAL_ERROR)
                raise
            else:
                transaction.set_status(SPANSTATUS.OK)
            finally:
                current.span = previous

    def transaction_of(self, job_id: str) -> sentry_sdk.tracing.Transaction | None:
        """The transaction of the attempt at ``job_id`` still completing, if any."""
        attempt = self._attempts.get(job_id)
        return None if attempt is None else attempt.transaction

    def _settled(self, job: Job | None) -> _Attempt | None:
        if job is None:
            return None
        with self._lock:
            return self._attempts.pop(job.id, None)

    def after_succeeded(self, queue: str, job: Job, duration: float) -> None:
        attempt = self._settled(job)
        if attempt is None:
            return
        if attempt.check_in is not None:
            _check_in_done(attempt.check_in, MonitorStatus.OK, duration)
        _finish(attempt)

    def after_retried(self, queue: str, job: Job, duration: float | None) -> None:
        attempt = self._settled(job)
        if attempt is None:
            return
        if attempt.check_in is not None:
            _check_in_done(attempt.check_in, MonitorStatus.ERROR, duration)
        integration = _integration()
        if integration is not None and integration.capture_retries:
            _capture(attempt, job, "warning", retried=True)
        _finish(attempt)

    def after_failed(self, queue: str, job: Job | None, duration: float | None) -> None:
        attempt = self._settled(job)
        if attempt is None or job is None:
            return
        if attempt.check_in is not None:
            _check_in_done(attempt.check_in, MonitorStatus.ERROR, duration)
        _capture(attempt, job, "error", retried=False)
        _finish(attempt)

    def _check_in(self, job: Job) -> tuple[str, str] | None:
        """Report a schedule's run in progress; (slug, check-in id), None if not one."""
        name = job.meta.get("schedule")
        if type(name) is not str or not name:
            return None
        slug = _slug(name)
        check_in_id = capture_checkin(
            monitor_slug=slug,
            status=MonitorStatus.IN_PROGRESS,
            monitor_config=self._config(name),
        )
        return None if check_in_id is None else (slug, check_in_id)

    def _config(self, name: str) -> MonitorConfig | None:
        """The monitor config of schedule ``name``: its cron or interval (in minutes, the
        finest unit Sentry's intervals have) and timezone; None if it has neither or
        cannot be read."""
        if name in self._configs:
            return self._configs[name]
        runner = current_runner()
        config: MonitorConfig | None = None
        if runner is not None:
            try:
                timing = Schedules(runner.connection).get(name).timing
            except (RQueueError, ValueError):
                timing = None
            if timing is not None and timing.cron:
                config = {"schedule": {"type": "crontab", "value": timing.cron}}
            elif timing is not None and timing.every_ms and timing.every_ms % 60_000 == 0:
                minutes = timing.every_ms // 60_000
                config = {"schedule": {"type": "interval", "value": minutes, "unit": "minute"}}
            if config is not None and timing is not None:
                config["timezone"] = timing.timezone
        self._configs[name] = config
        return config


_PROCESSING = _Processing()


def _finish(attempt: _Attempt) -> None:
    """Finish the attempt's transaction (and send it), in its own scope: what it sent
    since its call (a chain's next step, a batch's callbacks) is among its spans."""
    with use_isolation_scope(attempt.scope):
        attempt.transaction.finish()


def _capture(attempt: _Attempt, job: Job, level: str, retried: bool) -> None:
    """Capture the attempt's failure once, in its own scope and trace."""
    client = sentry_sdk.get_client()
    with use_isolation_scope(attempt.scope) as scope:
        scope.set_tag("rqueue.retried", "yes" if retried else "no")
        exc = attempt.exc
        if exc is None:  # a thread past its timeout: nothing reached the call
            event: dict[str, Any] = {"message": f"{job.task} {job.id} timed out"}
            hint: dict[str, Any] = {}
        else:
            mechanism = {"type": RqueueIntegration.identifier, "handled": False}
            event, hint = event_from_exception(exc, client.options, mechanism)  # type: ignore[assignment]
            _without_arguments_in_locals(event, job.task, should_send_default_pii())
        event["level"] = level
        event["transaction"] = job.task
        event.setdefault("contexts", {})["trace"] = attempt.transaction.get_trace_context()
        sentry_sdk.capture_event(event, hint=hint)  # type: ignore[arg-type]


def _without_arguments_in_locals(event: dict[str, Any], task: str, pii: bool) -> None:
    """Drop the local variables of rqueue's own frames (the worker's, whose locals are
    the payload and the job) and, unless ``pii``, of the task's function's frame,
    whose locals start as its arguments. Other frames keep what Sentry's
    ``include_local_variables`` gives them."""
    module, _, function = task.partition(":")
    function = function.rpartition(".")[2]
    for value in event.get("exception", {}).get("values", []):
        for frame in (value.get("stacktrace") or {}).get("frames", []):
            found = str(frame.get("module", ""))
            own = found.startswith("rqueue.")
            if own or (not pii and found == module and frame.get("function") == function):
                frame.pop("vars", None)


@contextmanager
def _publish(sending: observers.Sending) -> Iterator[None]:
    """The producer's side: a ``queue.publish`` span, its trace carried in the payload."""
    if _integration() is None:
        yield
        return
    parent = sentry_sdk.get_current_span()
    if parent is None:  # a worker completing an attempt: its transaction
        job = current_job()
        parent = None if job is None else _PROCESSING.transaction_of(job.id)
    if parent is None:  # no transaction: the trace of the scope is carried all the same
        scope = sentry_sdk.get_current_scope()
        sending.headers.update(scope.iter_trace_propagation_headers())
        yield
        return
    name = sending.task or "rqueue"
    with parent.start_child(
        op=OP.QUEUE_PUBLISH, name=name, origin=RqueueIntegration.origin
    ) as span:
        _messaging(span, sending.queue, sending.ids[0] if len(sending.ids) == 1 else None)
        sending.headers.update(
            sentry_sdk.get_current_scope().iter_trace_propagation_headers(span=span)
        )
        yield


def _messaging(span: sentry_sdk.tracing.Span, queue: str | None, message_id: str | None) -> None:
    span.set_data(SPANDATA.MESSAGING_SYSTEM, SYSTEM)
    if queue is not None:
        span.set_data(SPANDATA.MESSAGING_DESTINATION_NAME, queue)
    if message_id is not None:
        span.set_data(SPANDATA.MESSAGING_MESSAGE_ID, message_id)


def _described(queue: str, job: Job) -> dict[str, Any]:
    """The ``rqueue`` context of an attempt's events: its arguments only with PII on."""
    pii = should_send_default_pii()
    return {
        "queue": queue,
        "task": job.task,
        "id": job.id,
        "attempt": job.attempts,
        "args": list(job.args) if pii else SENSITIVE_DATA_SUBSTITUTE,
        "kwargs": dict(job.kwargs) if pii else SENSITIVE_DATA_SUBSTITUTE,
    }


def _check_in_done(check_in: tuple[str, str], status: str, duration: float | None) -> None:
    slug, check_in_id = check_in
    capture_checkin(monitor_slug=slug, check_in_id=check_in_id, status=status, duration=duration)


def _slug(name: str) -> str:
    """A monitor slug from a schedule's name: lower case, dashes, at most 50 characters."""
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-")[:50] or "schedule"


def _without_outcome_lines(event: Any, hint: Any) -> Any:
    """Drop the event Sentry's logging integration makes of rqueue's own log line for a
    task's outcome (its ``failed`` line): the failure is captured once, above."""
    extra = event.get("extra")
    outcome = isinstance(extra, dict) and "outcome" in extra and "task_id" in extra
    if event.get("logger") == _WORKER_LOGGER and outcome:
        return None
    return event
