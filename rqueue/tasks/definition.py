"""A task: a plain function that can also be dispatched to a queue, and its calls.

:class:`Task` is what ``@task`` (rqueue/tasks/decorator.py) makes of a function: still
callable inline, and ``dispatch`` and ``later`` turn a call into a job (its options
from rqueue/tasks/options.py) and push its payload. :class:`PendingDispatch` is one call
built and not yet sent, for :func:`dispatch_many` (many calls, one round trip per
connection) and workflows. Nothing flows back: a task never sees the worker.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from copy import copy
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, ParamSpec, TypeVar, cast, overload

from rqueue.encoding.payload import GROUP, Job, PayloadTemplate, encode, lane_of, new_id, new_ids
from rqueue.errors import InvalidTaskOption, TaskNotRegistered
from rqueue.middleware.base import dispatching
from rqueue.store.calls import UniqueLock
from rqueue.store.default import default_queue
from rqueue.tasks import observers
from rqueue.tasks.arguments import CallShape
from rqueue.tasks.bulk import push_calls
from rqueue.tasks.debouncing import Hints, push_debounced
from rqueue.tasks.dependencies import push_after
from rqueue.tasks.handles import Dispatched, TaskHandle
from rqueue.tasks.interception import current_interceptor
from rqueue.tasks.names import INTERNAL_PREFIX, derived_name, is_internal, unimportable_module
from rqueue.tasks.option_arguments import UsingArguments
from rqueue.tasks.option_values import group_of_call
from rqueue.tasks.options import UNIQUE, TaskOptions
from rqueue.tasks.validation import When, check_callable, delay_until

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rqueue.store.queue import RedisQueue

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


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
        self.is_async = inspect.iscoroutinefunction(fn)
        """``fn`` is ``async def``: a worker awaits it on its event loop (async mode).
        Known once here, since a worker asks at every attempt."""
        self._deliver: Callable[[Task[Any, Any], RedisQueue, Job, float], TaskHandle[Any]]
        self._deliver = Task._push if options.debounce is None else Task._push_debounced
        """How ``dispatch()`` sends a call, chosen once: a plain push asks nothing more."""
        self.debounce_hints = Hints()
        """A debounced task's guesses of each key's pending call (its ``using()``
        copies share them)."""

    def __repr__(self) -> str:
        return f"<task {self.name} on {self.options.queue!r}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def using(self, **given: Unpack[UsingArguments]) -> Task[P, R]:
        """The same task with options overridden for the dispatches made through it.

        ``middleware=`` adds middleware to these calls only, after the declared ones:
        they travel in the payload, so each must be a dataclass of plain values
        (docs/middleware.md).

        ``wait_replicas=1``: each dispatch returns once a replica has the task, so a
        failover right after cannot lose it (ReplicasNotReached if none confirms it in
        ``RQUEUE_WAIT_REPLICAS_TIMEOUT`` seconds; the task is queued all the same).
        """
        options = self.options.overridden(given)
        derived = copy(self)  # same function and name: already checked, its shape read
        derived.options = options
        derived.schedule = None
        derived.dispatch_hooks = dispatching(options.middleware + options.dispatch_middleware)
        derived.__dict__.pop("_plain", None)  # worked out again for its own options
        if options.after:  # waits for others (tasks/dependencies.py)
            derived._deliver = push_after
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
        return self._call(args, kwargs)

    def check_call(self, args: Sequence[Any], kwargs: dict[str, Any], given: int = 0) -> None:
        """TypeError naming the task unless its function can be called with exactly
        these arguments: at dispatch, not in the worker after all its tries.
        ``given``: with that many more first, as a worker calls a callback (the batch,
        the failure; the batch and its results) or a chain step with ``pipe=True`` (the
        step before's result)."""
        if self.shape is not None:
            # As given when none is (a hand-built call's args may not be a tuple: its
            # check says so, rather than a count of what unpacking it made).
            self.shape.check(self.name, (*(None,) * given, *args) if given else args, kwargs)

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

    def _call(self, args: Sequence[Any], kwargs: dict[str, Any] | None = None) -> PendingDispatch:
        if self.options.after:  # its own push (tasks/dependencies.py), one call at a time
            raise InvalidTaskOption(
                f"{self.name}: a call with after= is dispatched on its own (dispatch()), "
                "not built for dispatch_many or a workflow"
            )
        return PendingDispatch(self, tuple(args), dict(kwargs or {}))

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
        carried = options.job_meta()
        if carried:
            meta = {**(meta or {}), **carried}
        if options.unique is not False and not template:
            lock = {"key": self._unique_key(args, kwargs), "until": options.unique_until}
            meta = {**(meta or {}), UNIQUE: lock}
        if callable(options.group) and not template:
            meta = {**(meta or {}), GROUP: group_of_call(options.group, args, kwargs)}
        if dispatched_at is None:
            dispatched_at = time.time()
        job = Job(
            id=task_id or new_id(),
            task=self.name,
            args=tuple(args),
            kwargs=kwargs,
            dispatched_at=dispatched_at,
            meta=meta or {},
            **options.job_fields(dispatched_at),
        )
        if not (template and options.depends_on_call):  # a template's are per call
            for attribute, value in options.call_fields(args, kwargs).items():
                setattr(job, attribute, value)
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

    @cached_property
    def _plain(self) -> PayloadTemplate | None:
        """The payload template of every call of a plain task, made at its first
        dispatch: its calls' jobs differ only in their id, arguments and time, so each
        dispatch packs just those (no ``Job`` built, no option checked again: ``@task``
        checked them). None if a call's job is its own: a unique key, middleware acting
        at dispatch or carried in the payload, attributes of its arguments or its time,
        a debounced call."""
        options = self.options
        if (
            self.dispatch_hooks
            or options.dispatch_middleware
            or options.unique is not False
            or options.debounce is not None
            or options.depends_on_call
            or options.depends_on_time
            or options.after
        ):
            return None
        return PayloadTemplate(self.make_job((), {}, template=True))

    def _send(self, delay: float, args: Sequence[Any], kwargs: dict[str, Any]) -> TaskHandle[Any]:
        self.check_call(args, kwargs)
        interceptor = current_interceptor()
        if interceptor is not None:
            call = PendingDispatch(self, tuple(args), dict(kwargs), delay)
            return cast(TaskHandle[Any], interceptor(call, None, None))
        self.check_dispatchable()
        queue = self.connection()
        template = self._plain
        if template is not None and not observers.watching:  # the hot path
            config, task_id = queue.config, new_id()
            limit, keyring = config.max_payload_bytes, config.keyring
            payload = template.encode(task_id, args, kwargs, limit, time.time(), keyring)
            return self._push_payload(queue, template.job, task_id, payload, delay)
        job = self.make_job(args, kwargs)
        if observers.watching:  # tracing: its span around the push, its context carried
            sending = observers.Sending.of([job])
            return observers.sent(
                sending, lambda: self._deliver(self, queue, sending.onto(job), delay)
            )
        return self._deliver(self, queue, job, delay)

    def _push(self, queue: RedisQueue, job: Job, delay: float) -> TaskHandle[Any]:
        """Encode one call's job and push it: the handle of the call, or of the one
        holding its unique lock."""
        payload = encode(job, queue.config.max_payload_bytes, queue.config.keyring)
        locks = [self.unique_lock(job)] if self.options.unique is not False else []
        return self._push_payload(queue, job, job.id, payload, delay, locks)

    def _push_payload(
        self,
        queue: RedisQueue,
        job: Job,
        task_id: str,
        payload: bytes,
        delay: float,
        locks: Sequence[UniqueLock] = (),
    ) -> TaskHandle[Any]:
        """Push the payload of call ``task_id`` (of ``job``'s task, to its queue): the
        handle of the call, or of the one holding its unique lock (``locks``)."""
        keep_ms, wait = self.keep_ms, self.options.wait_replicas
        kept = frozenset([task_id] if keep_ms else [])
        lane = lane_of(job.meta)
        delay_ms = int(delay * 1000)
        owner = queue.push(job.queue, [payload], delay_ms, wait, kept, keep_ms, locks, lane)
        if owner:  # deduplicated: the handle is the call that holds the lock
            return TaskHandle(owner[task_id], job.task, job.queue, queue, deduplicated=True)
        return TaskHandle(task_id, job.task, job.queue, queue, keeps_result=bool(keep_ms))

    def _push_debounced(
        self, queue: RedisQueue, job: Job, delay: float
    ) -> TaskHandle[Any]:  # (rqueue/tasks/debouncing.py)
        return push_debounced(queue, job, self.options, self.keep_ms, delay, self.debounce_hints)


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
    if observers.watching and calls:  # tracing: one span around the push of them all
        queues = (call.task.options.queue for call in calls)
        sending = observers.Sending(queues, (call.task.name for call in calls), ids)
        return observers.sent(sending, lambda: push_calls(calls, ids, meta, unique, sending))
    return push_calls(calls, ids, meta, unique, None)


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
