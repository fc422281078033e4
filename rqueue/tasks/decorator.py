"""``@task``: registering a function as a task, with its options and schedule.

The registry of this process's tasks lives here too, as ``@task`` fills it: the only
process-wide state besides the default connection and the open ``fake()``/``sync()``
blocks (rqueue/tasks/interception.py). Workers look payload names up in it through
:mod:`rqueue.tasks.registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from rqueue.errors import InvalidTaskOption
from rqueue.tasks.definition import Task
from rqueue.tasks.iterable import driven
from rqueue.tasks.names import check_name
from rqueue.tasks.option_arguments import TaskArguments
from rqueue.tasks.options import declared
from rqueue.timing import Timing, seconds

if TYPE_CHECKING:
    from typing_extensions import Unpack

P = ParamSpec("P")
R = TypeVar("R")

_registered: dict[str, Task[Any, Any]] = {}
"""Every ``@task`` of this process by name."""


@overload
def task(fn: Callable[P, R], /) -> Task[P, R]: ...


@overload
def task(
    *,
    name: str | None = None,
    cron: str | None = None,
    every: float | timedelta | None = None,
    timezone: str = "UTC",
    **options: Unpack[TaskArguments],
) -> Callable[[Callable[P, R]], Task[P, R]]: ...


def task(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    cron: str | None = None,
    every: float | timedelta | None = None,
    timezone: str = "UTC",
    **options: Unpack[TaskArguments],
) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
    """Register a function as a task; use bare (``@task``) or with options
    (:class:`~rqueue.tasks.option_arguments.TaskArguments` lists them).

    ``keep_result=`` (seconds or a timedelta) keeps each call's status and return value
    that long, for ``handle.status()`` and ``handle.result()`` (docs/workflows.md).
    ``max_exceptions=``, ``retry_until=`` and ``fail_on_timeout=`` end its retries
    early (docs/tasks.md, "Job controls"); ``retry_for=`` and ``dont_retry_for=``
    (exception classes) fail it at once for the exceptions a retry cannot help, as
    ``raise rqueue.Fail(reason)`` does (docs/tasks.md, "Failing without a retry").
    ``middleware=`` wraps each run (and may act at dispatch); ``unique=`` keeps at most
    one call per key queued, for ``unique_for`` at most (docs/tasks.md, "Unique tasks").
    ``cron=`` or ``every=`` (with ``timezone=``) declares a schedule named after the
    task; worker parents serving its queue create or update it (see docs/schedules.md).
    ``iterable=True``: a generator yielding a cursor after each item, checkpointed and
    resumed after an interruption (docs/tasks.md, "Iterable tasks").
    """
    schedule = _declared_schedule(cron, every, timezone)
    if name is not None:
        check_name(name)
    checked = declared(options)
    if schedule is not None and checked.debounce is not None:
        raise InvalidTaskOption(
            "cron=/every= and debounce= cannot be combined: a schedule runs each of its "
            "calls at its time, while debounce drops all but the last of a burst"
        )

    def decorate(function: Callable[P, R]) -> Task[P, R]:
        if checked.iterable:  # its driver is what a worker calls: tasks/iterable.py
            function = driven(function)
        created = Task(function, checked, name)
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


def registered() -> dict[str, Task[Any, Any]]:
    """A copy of every task defined with ``@task`` in this process, by name."""
    return dict(_registered)


registered_task: Callable[[str], Task[Any, Any] | None] = _registered.get
"""The task registered under a name, or None: the registry's own lookup, asked for
every task a worker runs."""


def unregister(names: Iterable[str]) -> None:
    """Forget tasks, e.g. those a module registered before its import failed half way."""
    for name in names:
        _registered.pop(name, None)
