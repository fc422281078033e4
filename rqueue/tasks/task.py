"""``@task``: a plain function that can also be dispatched to a queue.

The decorated function stays callable inline; ``dispatch`` and ``later`` turn a call
into a payload and hand it to the queue. Nothing flows back: the task object never
sees the worker.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from copy import copy
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    NamedTuple,
    ParamSpec,
    TypeVar,
    cast,
    overload,
)

from rqueue.encoding.payload import (
    KEEP,
    MAX_DELAY_SECONDS,
    Backoff,
    Job,
    PayloadTemplate,
    checked_backoff,
    checked_keep,
    checked_max_exceptions,
    checked_retry_until,
    checked_timeout,
    checked_tries,
    encode,
    new_id,
    new_ids,
)
from rqueue.errors import (
    InvalidSchedule,
    InvalidTaskOption,
    ResultNotKept,
    RQueueError,
    TaskNotRegistered,
)
from rqueue.middleware.base import MIDDLEWARE, Middleware, carry, check_stack, dispatching
from rqueue.settings.config import LIMITS
from rqueue.store.cancel import CancelOutcome, cancel
from rqueue.store.default import default_queue
from rqueue.store.keys import validate_queue_name
from rqueue.store.queue import Push, UniqueLock
from rqueue.store.results import outcome, read_status, wait_status
from rqueue.tasks.arguments import CallShape
from rqueue.tasks.current import current_job
from rqueue.tasks.names import (
    INTERNAL_PREFIX,
    check_name,
    derived_name,
    is_internal,
    unimportable_module,
)
from rqueue.timing import Timing, seconds

if TYPE_CHECKING:
    from rqueue.store.queue import RedisQueue

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

Hook = Callable[..., Any]
When = datetime | timedelta | float | int
BackoffOption = float | Sequence[float] | str | tuple[str, float, float]
"""Seconds, a list of them, ``"exponential"`` or ``("exponential", base, cap)``."""
RetryUntil = When | Callable[[], When]
"""A datetime, or a timedelta or seconds from dispatch; or a callable returning one,
called at each dispatch."""
UniqueKey = bool | Callable[..., object]
"""``True`` (one per task) or a callable of the call's arguments returning its key."""
UniqueUntil = Literal["processed", "processing"]
DEFAULT_UNIQUE_FOR = 3600.0
"""Seconds a unique lock lasts unless released first: a lost worker never leaves one."""
UNIQUE = "unique"
"""The ``meta`` entry of a unique task's call: ``{"key": its lock's key, "until":
"processed" or "processing"}``, for the worker that releases the lock."""

Interceptor = Callable[["PendingDispatch", "str | None", "dict[str, Any] | None"], "Dispatched"]
"""Takes every dispatch instead of Redis: ``(call, id or None, meta or None)``."""

_registered: dict[str, Task[Any, Any]] = {}
"""Every ``@task`` of this process by name: the only process-wide state besides the
default connection and the open ``fake()``/``sync()`` blocks (:class:`_Blocks`).
Workers look payload names up here (:mod:`rqueue.tasks.registry`)."""


@dataclass(frozen=True)
class TaskOptions:
    """How a task is queued and run; ``None`` means the worker's default applies."""

    queue: str = "default"
    tries: int | None = None
    timeout: float | None = None
    backoff: Backoff = ()
    after_succeeded: Hook | None = None
    after_failed: Hook | None = None
    connection: RedisQueue | None = field(default=None, compare=False)
    wait_replicas: int | None = None
    """Replicas each dispatch waits for (Redis ``WAIT``); None: the connection's config."""
    keep_result: float | None = None
    """Seconds to keep each call's status and result (docs/workflows.md); None: none kept."""
    max_exceptions: int | None = None
    """Raised exceptions (timeouts and lost workers aside) after which it fails for good."""
    retry_until: RetryUntil | None = None
    """When it stops being retried or started (docs/tasks.md, "Job controls")."""
    fail_on_timeout: bool = False
    """A timeout fails it at once instead of retrying it."""
    middleware: tuple[Middleware, ...] = ()
    """Declared with ``@task(middleware=)``: the worker's registered task has them."""
    dispatch_middleware: tuple[Middleware, ...] = ()
    """Given to ``using(middleware=)``: they travel in each call's payload and run
    after the declared ones (Laravel's ``through()``)."""
    unique: UniqueKey = False
    """At most one call per key queued or running (docs/tasks.md, "Unique tasks")."""
    unique_for: float = DEFAULT_UNIQUE_FOR
    unique_until: UniqueUntil = "processed"

    def __post_init__(self) -> None:
        """The same ranges a worker checks when it decodes a payload (payload.py)."""
        validate_queue_name(self.queue)
        if self.keep_result is not None:
            _option(checked_keep, self.keep_result)
        if self.wait_replicas is not None:
            _option(partial(LIMITS["wait_replicas"][1].check, "wait_replicas"), self.wait_replicas)
        if self.tries is not None:
            _option(checked_tries, self.tries)
        if self.timeout is not None:
            _option(checked_timeout, self.timeout)
        _option(checked_backoff, self.backoff)
        if self.max_exceptions is not None:
            _option(checked_max_exceptions, self.max_exceptions)
        if callable(self.retry_until):
            check_callable(self.retry_until, "retry_until")
        elif self.retry_until is not None:
            retry_until_at(self.retry_until, time.time())
        if type(self.fail_on_timeout) is not bool:
            raise InvalidTaskOption(
                f"fail_on_timeout must be True or False, got {self.fail_on_timeout!r}"
            )
        check_stack(self.middleware, "middleware")
        check_stack(self.dispatch_middleware, "using(middleware=)", carried=True)
        if self.unique is not False and self.unique is not True:
            check_callable(self.unique, "unique")
        _option(checked_unique_for, self.unique_for)
        if self.unique_until not in ("processed", "processing"):
            raise InvalidTaskOption(
                f"unique_until must be 'processed' or 'processing', got {self.unique_until!r}"
            )
        for label, hook in (
            ("after_succeeded", self.after_succeeded),
            ("after_failed", self.after_failed),
        ):
            if hook is not None:
                check_callable(hook, label, may_be_async=True)  # awaited: see run_hook


def _option(check: Callable[[object], T], value: object) -> T:
    """``check(value)``, its ValueError raised as rqueue's own error (it names the option)."""
    try:
        return check(value)
    except ValueError as exc:
        raise InvalidTaskOption(str(exc)) from None


def check_callable(fn: object, what: str, may_be_async: bool = False) -> None:
    """Refuse what rqueue would call and get nothing done: a generator function (async
    or not) runs none of its body when called, and the call would count as done.
    ``may_be_async``: it may be ``async def``, as tasks (slot mode awaits them), hooks and
    listeners (awaited, rqueue/tasks/awaiting.py) may; a callable whose value dispatch needs
    at once (``retry_until``, ``unique``) may not."""
    if not callable(fn):
        raise InvalidTaskOption(f"{what} must be callable, got {fn!r}")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise InvalidTaskOption(
            f"{what} {getattr(fn, '__qualname__', fn)!r} is a generator function: calling it "
            "only creates a generator and runs none of its body; return a value instead"
        )
    if inspect.iscoroutinefunction(fn) and not may_be_async:
        raise InvalidTaskOption(
            f"{what} {getattr(fn, '__qualname__', fn)!r} is an async function, but its value "
            "is needed at once, where nothing awaits it: make it a plain def"
        )


class Dispatched(NamedTuple):
    """A handle on a dispatched task (a named tuple: ``dispatch_many`` makes thousands)."""

    id: str
    task: str
    queue: str
    connection: RedisQueue | None = None
    deduplicated: bool = False
    """True if a unique task's call was not queued: ``id`` is the call already queued
    or running with its key."""
    keeps_result: bool | None = None
    """Whether its task keeps its result (``keep_result``), if the handle came from the
    task (None: only its id is known, as from ``result_of``)."""

    def __repr__(self) -> str:
        dedup = ", deduplicated=True" if self.deduplicated else ""
        return f"Dispatched(id={self.id!r}, task={self.task!r}, queue={self.queue!r}{dedup})"

    def cancel(self) -> CancelOutcome:
        """Cancel the task if it has not started; the outcome says what happened."""
        return cancel(self.connection or default_queue(), self.id, self.queue)

    def status(self) -> str:
        """pending, delayed, running, succeeded, failed, cancelled, or unknown (its result
        was not kept, has expired, or no such task was dispatched)."""
        return read_status(self.connection or default_queue(), self.queue, self.id).status

    def result(self, timeout: float | None = None) -> Any:
        """Wait up to ``timeout`` seconds (None: for ever) for the task's return value.

        TaskFailed if it failed (with the remote exception's type, message and
        traceback), TaskCancelled if it was cancelled, TimeoutError if it has not
        finished in time. ResultNotKept (a TimeoutError) at once if its task keeps no
        result. A handle made from an id alone cannot know that: such a task never
        finishes as far as it can tell (``unknown``, as Celery's ``PENDING``), so give
        a timeout, after which the TimeoutError lists why there may be no result.
        """
        if self.keeps_result is False:
            raise ResultNotKept(
                f"task {self.id} ({self.task}) keeps no result, so result() would wait in "
                "vain: give its task keep_result= (in @task, or .using(keep_result=...) for "
                "this dispatch) to read its status and result"
            )
        queue = self.connection or default_queue()
        status = wait_status(queue, self.queue, self.id, timeout)
        if status.status == "unknown":
            raise TimeoutError(
                f"task {self.id} has no result after {timeout or 0:g} s on queue {self.queue!r}: "
                "its task keeps none (keep_result), its result expired, it was dispatched "
                "to another queue, or not yet (a chain's later step)"
            )
        return outcome(status)

    async def result_async(self, timeout: float | None = None) -> Any:
        """``result()`` for async code: the wait blocks a thread, never the event loop."""
        return await asyncio.to_thread(self.result, timeout)


class TaskHandle(Dispatched, Generic[R]):
    """A :class:`Dispatched` that knows its task's return type (what ``dispatch()`` of a
    ``Task[P, R]`` returns), so ``result()`` is typed ``R`` (an ``async def`` task's: the
    value its coroutine returns)."""

    def result(self, timeout: float | None = None) -> R:
        value: R = super().result(timeout)
        return value

    async def result_async(self, timeout: float | None = None) -> R:
        return await asyncio.to_thread(self.result, timeout)


class PendingDispatch(NamedTuple):
    """One call of a task, ready to be dispatched alone or in bulk, or as a workflow step."""

    task: Task[Any, Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    delay: float = 0.0
    """Seconds after its dispatch that the call is due (``delayed()``)."""

    def dispatch(self) -> Dispatched:
        return self.task._send(self.delay, self.args, self.kwargs)

    def delayed(self, when: When) -> PendingDispatch:
        """The same call, due at ``when`` after it is dispatched (as ``later()``): in a
        chain, counted from the moment the step before it succeeds."""
        return self._replace(delay=delay_until(when))


class Task(Generic[P, R]):
    """A function registered with ``@task``."""

    def __init__(self, fn: Callable[P, R], options: TaskOptions, name: str | None = None):
        check_callable(fn, "@task", may_be_async=True)
        self.fn = fn
        self.options = options
        self.name = name or derived_name(fn)
        if is_internal(self.name) and not is_internal(getattr(fn, "__module__", "") or ""):
            raise InvalidTaskOption(
                f"task name {self.name!r} is in the {INTERNAL_PREFIX!r} namespace, which is "
                "rqueue's own (workers run it only from a worker parent); choose another"
            )
        self._unimportable = unimportable_module(self.name.partition(":")[0])
        """Why no worker could import this task's module, or None: refused at dispatch."""
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", self.name)
        self.__wrapped__ = fn
        self.schedule: tuple[str | None, float | None, str] | None = None
        """``(cron, every seconds, timezone)`` if declared with ``@task(cron=/every=)``."""
        self.dispatch_hooks = dispatching(options.middleware + options.dispatch_middleware)
        """Its middleware that act at dispatch: each call then gets a job of its own."""
        self.shape = CallShape.of(fn)
        """The calls ``fn`` accepts (None: unknown), checked at every dispatch."""

    def __repr__(self) -> str:
        return f"<task {self.name} on {self.options.queue!r}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def using(
        self,
        *,
        queue: str | None = None,
        tries: int | None = None,
        timeout: float | None = None,
        backoff: BackoffOption | None = None,
        connection: RedisQueue | None = None,
        wait_replicas: int | None = None,
        keep_result: float | timedelta | None = None,
        max_exceptions: int | None = None,
        retry_until: RetryUntil | None = None,
        fail_on_timeout: bool | None = None,
        middleware: Sequence[Middleware] | None = None,
    ) -> Task[P, R]:
        """The same task with options overridden for the dispatches made through it.

        ``middleware=`` adds middleware to these calls only, after the declared ones:
        they travel in the payload, so each must be a dataclass of plain values
        (docs/middleware.md).

        ``wait_replicas=1``: each dispatch returns once a replica has the task, so a
        failover right after cannot lose it (ReplicasNotReached if none confirms it in
        ``RQUEUE_WAIT_REPLICAS_TIMEOUT`` seconds; the task is queued all the same).
        """
        changes: dict[str, Any] = {
            "queue": queue,
            "tries": tries,
            "timeout": timeout,
            "connection": connection,
            "wait_replicas": wait_replicas,
            "backoff": None if backoff is None else _backoff_tuple(backoff),
            "keep_result": None if keep_result is None else _keep_seconds(keep_result),
            "max_exceptions": max_exceptions,
            "retry_until": retry_until,
            "fail_on_timeout": fail_on_timeout,
            "dispatch_middleware": None if middleware is None else tuple(middleware),
        }
        options = replace(self.options, **{k: v for k, v in changes.items() if v is not None})
        derived = copy(self)  # same function and name: already checked, its shape read
        derived.options = options
        derived.schedule = None
        derived.dispatch_hooks = dispatching(options.middleware + options.dispatch_middleware)
        return derived

    def on_queue(self, queue: str) -> Task[P, R]:
        return self.using(queue=queue)

    def pending(self, *args: P.args, **kwargs: P.kwargs) -> PendingDispatch:
        """A call built and not sent, for ``dispatch_many``, chains and batches.

        TypeError now if the function cannot take these arguments, even given one more
        first (what a piped chain step or a callback gets): see :meth:`check_call`.
        """
        if self.shape is not None:
            self.shape.check_partial(self.name, args, kwargs)
        return PendingDispatch(self, tuple(args), dict(kwargs))

    def check_call(
        self, args: Sequence[Any], kwargs: dict[str, Any], given_first: bool = False
    ) -> None:
        """TypeError naming the task unless its function can be called with exactly
        these arguments: at dispatch, not in the worker after all its tries.
        ``given_first``: with one more first, as a worker calls a callback (the batch,
        the failure) or a chain step with ``pipe=True`` (the step before's result)."""
        if self.shape is not None:
            self.shape.check(self.name, (None, *args) if given_first else args, kwargs)

    # Each way to dispatch is typed twice: a handle's result() is what the function
    # returns, or for an ``async def`` one, what its coroutine returns.
    @overload
    def dispatch(
        self: Task[P, Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs
    ) -> TaskHandle[T]: ...
    @overload
    def dispatch(self: Task[P, T], *args: P.args, **kwargs: P.kwargs) -> TaskHandle[T]: ...
    def dispatch(self, *args: Any, **kwargs: Any) -> TaskHandle[Any]:
        """Queue a call to run as soon as a worker is free."""
        return self._send(0.0, args, kwargs)

    @overload
    def later(
        self: Task[P, Coroutine[Any, Any, T]], when: When, *args: P.args, **kwargs: P.kwargs
    ) -> TaskHandle[T]: ...
    @overload
    def later(self: Task[P, T], when: When, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[T]: ...
    def later(self, when: When, *args: Any, **kwargs: Any) -> TaskHandle[Any]:
        """Queue a call to run at ``when``: a datetime, a timedelta or a number of seconds.

        A naive datetime means this machine's local time.
        """
        return self._send(delay_until(when), args, kwargs)

    @overload
    async def dispatch_async(
        self: Task[P, Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs
    ) -> TaskHandle[T]: ...
    @overload
    async def dispatch_async(
        self: Task[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> TaskHandle[T]: ...
    async def dispatch_async(self, *args: Any, **kwargs: Any) -> TaskHandle[Any]:
        """``dispatch()`` for async code (FastAPI, aiohttp, an ``async def`` task).

        The push runs on a thread of the loop's default executor, through the very code
        ``dispatch()`` runs (encoding, signing, unique locks, retries during a failover,
        ``wait_replicas``, Redis Cluster and Sentinel), so the event loop never waits on
        Redis and no option behaves differently. A thread hop costs tens of
        microseconds, well under the round trip itself.
        """
        return await asyncio.to_thread(self._send, 0.0, args, kwargs)

    @overload
    async def later_async(
        self: Task[P, Coroutine[Any, Any, T]], when: When, *args: P.args, **kwargs: P.kwargs
    ) -> TaskHandle[T]: ...
    @overload
    async def later_async(
        self: Task[P, T], when: When, *args: P.args, **kwargs: P.kwargs
    ) -> TaskHandle[T]: ...
    async def later_async(self, when: When, *args: Any, **kwargs: Any) -> TaskHandle[Any]:
        """``later()`` for async code; ``when`` is read now, as ``later()`` reads it."""
        return await asyncio.to_thread(self._send, delay_until(when), args, kwargs)

    def dispatch_many(self, calls: Iterable[Sequence[Any] | PendingDispatch]) -> list[Dispatched]:
        """Queue many calls in one round trip; each is an args tuple or a ``pending()``."""
        pendings = []
        for call in calls:
            if not isinstance(call, (PendingDispatch, list, tuple)):
                raise TypeError(
                    f"{self.name}.dispatch_many() takes a tuple of arguments or a pending() "
                    f"call per call, got {call!r}"
                )
            pendings.append(call if isinstance(call, PendingDispatch) else self._call(call))
        return dispatch_many(pendings)

    def _call(self, args: Sequence[Any]) -> PendingDispatch:
        return PendingDispatch(self, tuple(args), {})

    def check_dispatchable(self) -> None:
        """Refuse to queue a task no worker could find (one defined in ``__main__``)."""
        if self._unimportable is not None:
            raise TaskNotRegistered(f"cannot dispatch task {self.name}: {self._unimportable}")

    def make_job(
        self,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        meta: dict[str, Any] | None = None,
        dispatched_at: float | None = None,
        task_id: str | None = None,
        template: bool = False,
    ) -> Job:
        """The job of one call, with every ``before_dispatch`` of its middleware
        applied; or a ``template`` for ``dispatch_many``, with no arguments, to which
        none is."""
        options = self.options
        if options.keep_result is not None:
            meta = {**(meta or {}), KEEP: self.keep_ms}
        if options.dispatch_middleware:
            meta = {**(meta or {}), MIDDLEWARE: [carry(m) for m in options.dispatch_middleware]}
        if options.unique is not False and not template:
            lock = {"key": self._unique_key(args, kwargs), "until": options.unique_until}
            meta = {**(meta or {}), UNIQUE: lock}
        if dispatched_at is None:
            dispatched_at = time.time()
        until = options.retry_until
        if until is not None:
            until = retry_until_at(until() if callable(until) else until, dispatched_at)
        job = Job(
            id=task_id or new_id(),
            task=self.name,
            args=tuple(args),
            kwargs=kwargs,
            queue=options.queue,
            tries=options.tries,
            timeout=options.timeout,
            backoff=options.backoff,
            dispatched_at=dispatched_at,
            meta=meta or {},
            max_exceptions=options.max_exceptions,
            retry_until=until,
            fail_on_timeout=options.fail_on_timeout,
        )
        if not template:
            for middleware in self.dispatch_hooks:
                middleware.before_dispatch(job)
        return job

    def _unique_key(self, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
        """The call's lock key, scoped by the task's name: two tasks never share one."""
        unique = self.options.unique
        if not callable(unique):  # True: one lock for the whole task
            return self.name
        key = unique(*args, **kwargs)
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise InvalidTaskOption(
                f"unique= of task {self.name} returned {key!r} for this call; it must return "
                "a str or an int, the call's lock key"
            )
        return f"{self.name}:{key}"

    def unique_lock(self, job: Job, position: int = 0) -> UniqueLock:
        """The lock a unique task's call takes as its payload (at ``position`` among
        those pushed with it) is pushed."""
        lasts_ms = round(self.options.unique_for * 1000)
        return UniqueLock(position, job.meta[UNIQUE]["key"], job.id, lasts_ms)

    @property
    def keep_ms(self) -> int:
        """How long each call keeps its result, in milliseconds (0: not kept)."""
        keep = self.options.keep_result
        return 0 if keep is None else round(keep * 1000)

    def connection(self) -> RedisQueue:
        return self.options.connection or default_queue()

    def _send(self, delay: float, args: Sequence[Any], kwargs: dict[str, Any]) -> TaskHandle[Any]:
        self.check_call(args, kwargs)
        interceptor = current_interceptor()
        if interceptor is not None:
            call = PendingDispatch(self, tuple(args), dict(kwargs), delay)
            return cast(TaskHandle[Any], interceptor(call, None, None))
        self.check_dispatchable()
        queue = self.connection()
        job = self.make_job(args, kwargs)
        payload = encode(job, queue.config.max_payload_bytes)
        kept = frozenset([job.id] if self.keep_ms else [])
        wait = self.options.wait_replicas
        locks = [self.unique_lock(job)] if self.options.unique is not False else []
        owner = queue.push(job.queue, [payload], int(delay * 1000), wait, kept, self.keep_ms, locks)
        if owner:  # deduplicated: the handle is the call that holds the lock
            return TaskHandle(owner[job.id], job.task, job.queue, queue, deduplicated=True)
        return TaskHandle(job.id, job.task, job.queue, queue, keeps_result=bool(self.keep_ms))


def dispatch_many(
    calls: Iterable[PendingDispatch],
    ids: Sequence[str] | None = None,
    meta: dict[str, Any] | None = None,
) -> list[Dispatched]:
    """Queue calls of any tasks, grouped per connection, one round trip per connection.

    Each distinct task (with its options) is encoded once as a template; each call
    then packs only its id, args and kwargs (see ``PayloadTemplate``). ``ids`` (one
    per call; new ones if None) and ``meta`` (shared by every call) are for workflows:
    a batch gives its members ids it can count them by.
    """
    if isinstance(calls, (PendingDispatch, Task)):  # a tuple itself: would be iterated
        raise TypeError(
            f"dispatch_many takes a list of pending() calls, got one alone ({calls!r}): "
            "put it in a list, or dispatch it with .dispatch()"
        )
    calls = [pending_call(call, "dispatch_many") for call in calls]
    for call in calls:
        call.task.check_call(call.args, call.kwargs)
    interceptor = current_interceptor()
    if interceptor is not None:
        given = [None] * len(calls) if ids is None else list(ids)
        return [interceptor(c, i, meta) for c, i in zip(calls, given, strict=True)]
    unique = ids is None  # a workflow's calls are not deduplicated: a batch counts each
    ids = new_ids(len(calls)) if ids is None else list(ids)
    groups: dict[tuple[int, str, int], _Group] = {}
    """Per connection, queue and delay (ms): the payloads pushed together."""
    replicas: dict[int, int] = {}
    """Per connection, the most replicas any of its tasks waits for (its own, or the
    connection's ``wait_replicas``)."""
    # Keyed by id(task); holding the task keeps that id from being reused meanwhile.
    templates: dict[int, tuple[Task[Any, Any], RedisQueue, PayloadTemplate]] = {}
    now = time.time()
    handles: list[Dispatched] = []
    for call, task_id in zip(calls, ids, strict=True):
        entry = templates.get(id(call.task))
        if entry is None:
            task = call.task
            task.check_dispatchable()
            queue = task.connection()
            wanted = task.options.wait_replicas
            wanted = queue.config.wait_replicas if wanted is None else wanted
            replicas[id(queue)] = max(replicas.get(id(queue), 0), wanted)
            template = PayloadTemplate(task.make_job((), {}, meta, now, template=True))
            entry = templates[id(task)] = (task, queue, template)
        task, queue, template = entry
        key = (id(queue), task.options.queue, round(call.delay * 1000))
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(queue, [], set(), 0, [])
        limit = queue.config.max_payload_bytes
        if task.dispatch_hooks or task.options.unique is not False:  # each call's own job
            job = task.make_job(call.args, call.kwargs, meta, now, task_id)
            if unique and task.options.unique is not False:
                group.locks.append(task.unique_lock(job, len(group.payloads)))
            group.payloads.append(encode(job, limit))
        else:
            group.payloads.append(template.encode(task_id, call.args, call.kwargs, limit))
        if task.keep_ms:
            group.kept.add(task_id)
            group.keep_ms = max(group.keep_ms, task.keep_ms)
        keeps = bool(task.keep_ms)
        handles.append(
            TaskHandle(task_id, task.name, task.options.queue, queue, keeps_result=keeps)
        )
    by_connection: dict[int, tuple[RedisQueue, list[Push]]] = {}
    for (connection, name, delay_ms), group in groups.items():
        kept = frozenset(group.kept)
        push = Push(name, delay_ms, group.payloads, kept, group.keep_ms, group.locks)
        by_connection.setdefault(connection, (group.queue, []))[1].append(push)
    owners: dict[str, str] = {}
    for connection, (queue, pushes) in by_connection.items():
        owners.update(queue.push_many(pushes, replicas.get(connection)))
    if owners:  # deduplicated: each handle is the call that holds its lock
        handles = [
            h._replace(id=owners[h.id], deduplicated=True, keeps_result=None)
            if h.id in owners
            else h
            for h in handles
        ]
    return handles


def pending_call(call: object, where: str) -> PendingDispatch:
    """``call`` if it is a ``pending()`` call; TypeError saying what ``where`` (e.g.
    ``dispatch_many``) expected and what it got instead, for the usual mistakes."""
    if isinstance(call, PendingDispatch):
        return call
    if isinstance(call, Task):
        got = f"the task {call.name} itself: pass {call.__name__}.pending(...) with its arguments"
    elif isinstance(call, Dispatched):
        got = f"the handle of task {call.id}, already dispatched"
    elif callable(call):
        name = getattr(call, "__qualname__", repr(call))
        got = f"{name}, which is not a task: decorate it with @task, then pass .pending(...)"
    else:
        got = f"{type(call).__name__} {call!r}"
    raise TypeError(f"{where} takes pending() calls (task.pending(args...)), got {got}")


@dataclass
class _Group:
    """Payloads of one connection, queue and delay, gathered by ``dispatch_many``."""

    queue: RedisQueue
    payloads: list[bytes]
    kept: set[str]
    keep_ms: int
    locks: list[UniqueLock]


def delay_until(when: When) -> float:
    """Seconds from now until ``when``; the past means now.

    Every conversion that can overflow (an int too big for a float, a naive datetime
    outside what the local time zone can express) is inside the check, so a bad
    ``when`` is always an InvalidSchedule that names it, never an OverflowError.
    """
    if isinstance(when, bool) or not isinstance(when, (datetime, timedelta, int, float)):
        raise InvalidSchedule(
            f"later(when) needs a datetime, timedelta or seconds, not {type(when).__name__}"
        )
    try:
        if isinstance(when, datetime):
            target = when if when.tzinfo is not None else when.astimezone()
            seconds = target.timestamp() - time.time()
        elif isinstance(when, timedelta):
            seconds = when.total_seconds()
        else:
            seconds = float(when)
    except (OverflowError, ValueError, OSError) as exc:
        raise InvalidSchedule(f"later(when) cannot use {when!r}: {exc}") from None
    if not math.isfinite(seconds):
        raise InvalidSchedule(f"later(when) needs a finite time, got {when!r}")
    if seconds > MAX_DELAY_SECONDS:
        raise InvalidSchedule(
            f"later(when) time {when!r} is more than ten years away; is it in milliseconds?"
        )
    return max(0.0, seconds)


def retry_until_at(when: object, dispatched_at: float) -> float:
    """``retry_until`` as epoch seconds: a datetime as it is (a naive one in local time),
    a timedelta or a number of seconds counted from ``dispatched_at``; InvalidTaskOption
    naming it otherwise (a callable's result too, at dispatch)."""
    if isinstance(when, bool) or not isinstance(when, (datetime, timedelta, int, float)):
        raise InvalidTaskOption(
            "retry_until must be a datetime, a timedelta, seconds or a callable returning "
            f"one, got {when!r}"
        )
    try:
        if isinstance(when, datetime):
            return checked_retry_until(when.timestamp())
        after = when.total_seconds() if isinstance(when, timedelta) else float(when)
        if not 0 < after <= MAX_DELAY_SECONDS:
            raise ValueError(
                f"retry_until must be above 0 and at most {MAX_DELAY_SECONDS:,} seconds "
                f"(ten years) after dispatch, got {when!r}"
            )
        return checked_retry_until(dispatched_at + after)
    except (OverflowError, ValueError, OSError) as exc:
        raise InvalidTaskOption(f"retry_until cannot use {when!r}: {exc}") from None


def checked_unique_for(duration: object) -> float:
    """Seconds a unique lock may last: from 1 ms to ten years, else ValueError naming it."""
    if (
        isinstance(duration, bool)
        or not isinstance(duration, (int, float))
        or not 0.001 <= duration <= MAX_DELAY_SECONDS
    ):
        raise ValueError(
            f"unique_for must be a number of seconds (or a timedelta) from 0.001 to "
            f"{MAX_DELAY_SECONDS:,} (ten years), got {duration!r}"
        )
    return float(duration)


def _backoff_tuple(backoff: object) -> Backoff:
    return _option(checked_backoff, backoff)


def _keep_seconds(keep: object) -> float:
    return _option(
        checked_keep, seconds(keep, "keep_result") if isinstance(keep, timedelta) else keep
    )


@overload
def task(fn: Callable[P, R], /) -> Task[P, R]: ...


@overload
def task(
    *,
    queue: str = "default",
    tries: int | None = None,
    backoff: BackoffOption = (),
    timeout: float | None = None,
    after_succeeded: Hook | None = None,
    after_failed: Hook | None = None,
    name: str | None = None,
    cron: str | None = None,
    every: float | timedelta | None = None,
    timezone: str = "UTC",
    keep_result: float | timedelta | None = None,
    max_exceptions: int | None = None,
    retry_until: RetryUntil | None = None,
    fail_on_timeout: bool = False,
    middleware: Sequence[Middleware] = (),
    unique: UniqueKey = False,
    unique_for: float | timedelta = DEFAULT_UNIQUE_FOR,
    unique_until: UniqueUntil = "processed",
) -> Callable[[Callable[P, R]], Task[P, R]]: ...


def task(
    fn: Callable[P, R] | None = None,
    /,
    *,
    queue: str = "default",
    tries: int | None = None,
    backoff: BackoffOption = (),
    timeout: float | None = None,
    after_succeeded: Hook | None = None,
    after_failed: Hook | None = None,
    name: str | None = None,
    cron: str | None = None,
    every: float | timedelta | None = None,
    timezone: str = "UTC",
    keep_result: float | timedelta | None = None,
    max_exceptions: int | None = None,
    retry_until: RetryUntil | None = None,
    fail_on_timeout: bool = False,
    middleware: Sequence[Middleware] = (),
    unique: UniqueKey = False,
    unique_for: float | timedelta = DEFAULT_UNIQUE_FOR,
    unique_until: UniqueUntil = "processed",
) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
    """Register a function as a task; use bare (``@task``) or with options.

    ``keep_result=`` (seconds or a timedelta) keeps each call's status and return value
    that long, for ``handle.status()`` and ``handle.result()`` (docs/workflows.md).
    ``max_exceptions=``, ``retry_until=`` and ``fail_on_timeout=`` end its retries
    early (docs/tasks.md, "Job controls").
    ``middleware=`` wraps each run (and may act at dispatch); ``unique=`` keeps at most
    one call per key queued, for ``unique_for`` at most (docs/tasks.md, "Unique tasks").
    ``cron=`` or ``every=`` (with ``timezone=``) declares a schedule named after the
    task; worker parents serving its queue create or update it (see docs/schedules.md).
    """
    schedule = _declared_schedule(cron, every, timezone)
    if name is not None:
        check_name(name)
    options = TaskOptions(
        queue=queue,
        tries=tries,
        timeout=timeout,
        backoff=_backoff_tuple(backoff),
        after_succeeded=after_succeeded,
        after_failed=after_failed,
        keep_result=None if keep_result is None else _keep_seconds(keep_result),
        max_exceptions=max_exceptions,
        retry_until=retry_until,
        fail_on_timeout=fail_on_timeout,
        middleware=tuple(middleware),
        unique=unique,
        unique_for=(
            seconds(unique_for, "unique_for") if isinstance(unique_for, timedelta) else unique_for
        ),
        unique_until=unique_until,
    )

    def decorate(function: Callable[P, R]) -> Task[P, R]:
        created = Task(function, options, name)
        created.schedule = schedule
        _registered[created.name] = created
        return created

    return decorate(fn) if fn is not None else decorate


def _declared_schedule(
    cron: str | None, every: float | timedelta | None, timezone: str
) -> tuple[str | None, float | None, str] | None:
    """Validate a declared schedule at import time: a typo fails loudly, not silently."""
    if cron is None and every is None:
        return None
    every_s = None if every is None else seconds(every, "every=")
    Timing(cron, None if every_s is None else round(every_s * 1000), timezone)
    return (cron, every_s, timezone)


def call_hook(hook: Hook, value: Any, job: Job) -> Any:
    """Call a hook with ``(value, job)``, or ``(value)`` if it takes one argument; what
    it returns (an ``async def`` hook's coroutine) is the caller's to await."""
    try:
        parameters = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):
        return hook(value, job)
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_varargs = any(p.kind == p.VAR_POSITIONAL for p in parameters)
    if len(positional) >= 2 or takes_varargs:
        return hook(value, job)
    return hook(value)


_intercepted: ContextVar[Interceptor | None] = ContextVar("rqueue_interceptor", default=None)
"""The interceptor of the ``intercept()`` block this context runs in: a block's code,
the asyncio tasks it starts and ``asyncio.to_thread`` calls (both copy the context)."""


class _Blocks:
    """The ``intercept()`` blocks open in this process, and sync mode for all of it.

    Process-wide on purpose, and only a fallback for a context that is in no block of
    its own: a thread a test started in a ``fake()`` block (a ``ThreadPoolExecutor``
    copies no context) must still be recorded. Never for a worker's run, though: a
    task running beside another (``--threads``, ``--slots``) sees only its own.
    """

    def __init__(self) -> None:
        self.process: Interceptor | None = None
        """``RQUEUE_SYNC``'s (:func:`intercept_process`): every context's last resort."""
        self.open: dict[int, tuple[Interceptor, Interceptor | None]] = {}
        """Per open block (by its id): its interceptor, and the one it replaced in its
        context (None if none): the blocks nested in one another form one chain."""
        self.lock = threading.Lock()

    def innermost(self) -> Interceptor | None:
        """The open block a context outside every block belongs to: the innermost one
        if all open blocks nest in one another; RQueueError if there are two chains
        (tests running in threads at once), which one could only guess."""
        with self.lock:
            blocks = list(self.open.values())
        if not blocks:
            return self.process
        outer = {id(replaced) for _, replaced in blocks}
        inner = [interceptor for interceptor, _ in blocks if id(interceptor) not in outer]
        if len(inner) != 1:
            raise RQueueError(
                "a dispatch from a thread outside every fake()/sync() block, while blocks "
                "are open in several threads: rqueue cannot tell which one it belongs to; "
                "start the thread in its block's context (contextvars.copy_context().run)"
            )
        return inner[0]


_blocks = _Blocks()


@contextmanager
def intercept(interceptor: Interceptor) -> Iterator[None]:
    """Send the dispatches of this block to ``interceptor`` instead of Redis: those of
    this context, and of threads in no block of their own (see :class:`_Blocks`); a
    block inside it takes them over until it ends. For :mod:`rqueue.testing`."""
    replaced = _intercepted.get()
    token = _intercepted.set(interceptor)
    key = id(token)
    with _blocks.lock:
        _blocks.open[key] = (interceptor, replaced)
    try:
        yield
    finally:
        with _blocks.lock:
            del _blocks.open[key]
        try:
            _intercepted.reset(token)
        except ValueError:  # ended in another context than it began (a fixture's teardown)
            _intercepted.set(replaced)


def intercept_process(interceptor: Interceptor | None) -> None:
    """Send every dispatch of the process that no block takes to ``interceptor``
    (``RQUEUE_SYNC``; None: to Redis again)."""
    _blocks.process = interceptor


def current_interceptor() -> Any:
    """What takes this context's dispatches instead of Redis, or None: its own block's,
    else (outside a worker's run) the process's. rqueue.testing's also takes whole
    chains and batches (``take_chain``, ``take_batch``), hence ``Any``."""
    own = _intercepted.get()
    if own is not None:
        return own
    if current_job() is not None:  # a worker's run: another run's block is not its own
        return _blocks.process
    return _blocks.innermost()


def registered() -> dict[str, Task[Any, Any]]:
    """A copy of every task defined with ``@task`` in this process, by name."""
    return dict(_registered)


def registered_task(name: str) -> Task[Any, Any] | None:
    return _registered.get(name)


def unregister(names: Iterable[str]) -> None:
    """Forget tasks, e.g. those a module registered before its import failed half way."""
    for name in names:
        _registered.pop(name, None)
