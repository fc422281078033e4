"""What a job middleware is, how a stack of them runs, and how one travels in a payload.

A middleware wraps each run of a task in the worker child (``__call__(job,
call_next)``) and may act at dispatch (``before_dispatch``). Hooks
(``after_succeeded``/``after_failed``) and event listeners observe outcomes; only a
middleware can decide whether, and when, a task runs (docs/middleware.md).

Middleware declared with ``@task(middleware=)`` live in code, on both sides. Those
given to ``using(middleware=)`` concern some calls only, so they travel in the
payload as ``[class name, fields]``, and the worker builds them again from classes
already defined in its process: a payload can name a middleware, never a module to
import.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from rqueue.encoding.codec import pack
from rqueue.encoding.payload import Job
from rqueue.encoding.ranges import MAX_DELAY_SECONDS
from rqueue.errors import InvalidPayload, InvalidTaskOption, describe
from rqueue.tasks.current import Runner, current_runner
from rqueue.tasks.names import module_name

MIDDLEWARE = "middleware"
"""The ``meta`` entry of a call's own middleware (``using(middleware=)``)."""

MAX_KEY = 500
"""Longest name or key a middleware's state may have (part of a Redis key)."""

_classes: dict[str, type[Middleware]] = {}
"""Every Middleware subclass defined in this process, by ``module:qualname``."""


class Middleware:
    """Subclass it and override either method, or both.

    ``__call__`` runs in the worker around the task: call ``call_next()`` to run the
    rest of the stack and the task, and return its result. Not calling it skips the
    run, which then counts as a success returning what you return (as a Laravel job
    whose middleware does not call ``$next``). Raise :class:`Release` to put the job
    back for later without using an attempt.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _classes[_name(cls)] = cls

    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        return call_next()

    def before_dispatch(self, job: Job) -> None:
        """Runs in the dispatching process before the call is encoded: it may add to
        ``job.meta``, or raise to refuse the dispatch."""


class Release(Exception):
    """Raised by a middleware: put the job back, due in ``delay`` seconds, with its
    attempt given back (a rate limit or a lock is not the task failing)."""

    def __init__(self, delay: float = 0.0) -> None:
        if not _is_seconds(delay):
            raise ValueError(
                f"Release(delay) needs seconds from 0 to {MAX_DELAY_SECONDS:,}, got {delay!r}"
            )
        super().__init__(f"released for {delay:g} s")
        self.delay = float(delay)


class Parked(Release):
    """Raised by a middleware whose own script already put the job back (``Concurrency``
    parks a call waiting for a slot): the worker no longer holds it, so it sends
    nothing more. A second release would be wrong, not just wasted: the call may be
    reserved again already, by another worker, with the very same bytes."""


class RetryIn(Exception):
    """Raised ``from`` a task's exception: handle it as that exception, but retry (if
    a retry is due at all) after ``delay`` seconds instead of the task's backoff."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"retry in {delay:g} s")
        self.delay = delay


def run_through(stack: Sequence[Middleware], job: Job, call: Callable[[], Any]) -> Any:
    """Call ``call`` inside every middleware of ``stack``, the first outermost."""

    def step(index: int) -> Any:
        if index == len(stack):
            return call()
        return stack[index](job, lambda: step(index + 1))

    return step(0)


def dispatching(stack: Sequence[Middleware]) -> tuple[Middleware, ...]:
    """The middleware of ``stack`` that act at dispatch (override ``before_dispatch``)."""
    return tuple(m for m in stack if type(m).before_dispatch is not Middleware.before_dispatch)


def check_stack(stack: object, what: str, carried: bool = False) -> None:
    """Refuse what is not a sequence of middleware; a ``carried`` one must also be a
    dataclass whose fields msgpack can encode (it travels in the payload)."""
    if not isinstance(stack, (tuple, list)):
        raise InvalidTaskOption(f"{what} must be a list of middleware, got {stack!r}")
    for middleware in stack:
        if not isinstance(middleware, Middleware):
            raise InvalidTaskOption(
                f"{what}: {middleware!r} is not a middleware (subclass rqueue.middleware."
                "Middleware)"
            )
        if carried:
            carry(middleware)


def carry(middleware: Middleware) -> list[Any]:
    """``[class name, fields]``: a middleware as the payload holds it."""
    cls = type(middleware)
    name = _name(cls)
    if not dataclasses.is_dataclass(middleware) or _classes.get(name) is not cls:
        raise InvalidTaskOption(
            f"using(middleware=): {middleware!r} travels in the payload, so it must be a "
            "dataclass defined at a module's top level; declare it with "
            "@task(middleware=) instead"
        )
    fields = {f.name: getattr(middleware, f.name) for f in dataclasses.fields(middleware) if f.init}
    try:
        pack(fields)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidTaskOption(
            f"using(middleware=): {middleware!r} travels in the payload, and msgpack cannot "
            f"encode its fields ({exc}); a function cannot travel: declare it with "
            "@task(middleware=) instead"
        ) from None
    return [name, fields]


def carried(entries: object) -> tuple[Middleware, ...]:
    """The middleware a payload carries, built again; InvalidPayload if any entry is
    not one that this process defines, or its class refuses its fields."""
    if type(entries) is not list:
        raise InvalidPayload("the payload's middleware must be a list")
    built: list[Middleware] = []
    for entry in entries:
        if type(entry) is not list or len(entry) != 2 or type(entry[1]) is not dict:
            raise InvalidPayload("a payload's middleware entry must be [name, fields]")
        name, fields = entry
        cls = _classes.get(name) if type(name) is str else None
        if cls is None or not dataclasses.is_dataclass(cls):
            raise InvalidPayload(f"the payload names middleware {name!r}, not defined here")
        try:
            built.append(cls(**fields))
        except Exception as exc:  # its own checks refused the fields
            raise InvalidPayload(
                f"middleware {name} refused the payload's fields: {describe(exc)[1]}"
            ) from None
    return tuple(built)


def _name(cls: type) -> str:
    """``module:qualname``, with the module's importable name when it runs as a
    script: the worker imports the script's module by that name (as for a task)."""
    return f"{module_name(cls.__module__)}:{cls.__qualname__}"


def _is_seconds(value: object) -> bool:
    return (
        type(value) in (int, float)
        and math.isfinite(value)  # type: ignore[arg-type]
        and 0 <= value <= MAX_DELAY_SECONDS  # type: ignore[operator]
    )


def running_on(what: str) -> Runner:
    """The worker running this job (or ``rqueue.testing.sync()``); a clear error where
    there is none, such as a task called inline."""
    runner = current_runner()
    if runner is None:
        raise RuntimeError(
            f"{what} keeps its state in Redis and runs in a worker (or under "
            "rqueue.testing.sync()), not around a task called inline"
        )
    return runner


def key_of(by: object, job: Job, default: str) -> str:
    """A middleware's key for one call: the key ``by`` gives (a str or an int, or what
    it returns for the call's arguments if it is a function) as :func:`given_key`;
    ``default`` (a :func:`task_key`, or ``all``) if it gives None."""
    key = by(*job.args, **job.kwargs) if callable(by) else by
    if key is None:
        return default
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise TypeError(f"a middleware key must be a str or an int, got {key!r}")
    key = str(key)
    if not 0 < len(key) <= MAX_KEY:
        raise ValueError(f"a middleware key must have 1 to {MAX_KEY} characters, got {key!r}")
    return given_key(key)


def given_key(key: str) -> str:
    """The state of a key given by ``by=`` (or a shared lock's ``key``): ``by:<key>``.

    With :func:`task_key`, the one place keys are namespaced: a key given never equals
    a task's own (``ThrottlesExceptions(by="billing:charge")`` once opened the breaker
    of the task ``billing:charge`` itself).
    """
    return f"by:{key}"


def lock_key(key: str, shared: bool, job: Job) -> str:
    """The state of a lock or a set of slots named ``key``: the job's task's own, or
    with ``shared`` one that every task naming ``key`` uses."""
    return given_key(key) if shared else f"{task_key(job.task)}:{key}"


def holder_of(job: Job, runner: Runner, expire_after: float | None) -> tuple[str, float]:
    """The token of the run that holds a lock or a slot (its task id and attempt: a
    retry never frees another run's), and the seconds it holds it at most: by default
    the job's timeout plus the worker's kill grace, so a killed holder never leaks it."""
    if expire_after is None:
        expire_after = (job.timeout or runner.timeout) + runner.kill_grace
    return f"{job.id}:{job.attempts}", expire_after


def task_key(task: str) -> str:
    """The state a middleware keeps per task by default: ``task:<task name>``."""
    return f"task:{task}"


def check_name(name: object, what: str) -> None:
    """A middleware's name (part of its Redis key): a non-empty str of at most MAX_KEY."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_KEY:
        raise ValueError(f"{what} must be a str of 1 to {MAX_KEY} characters, got {name!r}")


def check_lock(what: str, key: object, expire_after: object, **flags: object) -> None:
    """The options a lock or a slot shares (``WithoutOverlapping``, ``Concurrency``):
    its key, its expiry, and flags that must be True or False; ValueError naming the
    option (``what`` is the middleware's name)."""
    check_name(key, f"{what}(key)")
    if expire_after is not None:
        check_seconds(expire_after, f"{what}(expire_after)", 0.001)
    for flag, value in flags.items():
        if type(value) is not bool:
            raise ValueError(f"{what}({flag}) must be True or False, got {value!r}")


def check_by(by: object) -> None:
    if (
        by is not None
        and not callable(by)
        and (isinstance(by, bool) or not isinstance(by, (str, int)))
    ):
        raise ValueError(f"by must be None, a str, an int or a function, got {by!r}")


def check_seconds(value: object, what: str, low: float = 0.0) -> float:
    """``value`` as seconds: a finite number from ``low`` to ten years, else ValueError."""
    if not _is_seconds(value) or value < low:  # type: ignore[operator]
        raise ValueError(
            f"{what} must be a number of seconds from {low:g} to {MAX_DELAY_SECONDS:,}, "
            f"got {value!r}"
        )
    return float(value)  # type: ignore[arg-type]
