"""A new schedule from ``add``'s arguments: validated, timed, and carrying its task's
options, before anything is stored.

:class:`Builder` serves one ``add`` or one ``add_many``. What is the same for many
schedules it reads once: Redis's clock per queue (a round trip), and per task and
queue the options its runs carry (a ``using()`` and a template job, the most of a
schedule's cost in Python). So 10^5 schedules of one task are built in seconds.
The checks here also serve ``update`` (:func:`checked`, :func:`call_options`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from rqueue.encoding.payload import GROUP, KEEP, PRIORITY, encode
from rqueue.encoding.ranges import MAX_DELAY_SECONDS
from rqueue.errors import InvalidSchedule, InvalidTaskOption, TaskNotRegistered
from rqueue.middleware.base import MIDDLEWARE
from rqueue.middleware.stacks import CONCURRENCY
from rqueue.schedules.record import DEFAULT_MISFIRE_GRACE, MISFIRE_POLICIES, Schedule
from rqueue.tasks import registry
from rqueue.tasks.debouncing import refuse_debounced
from rqueue.tasks.decorator import registered
from rqueue.tasks.iterable import ITERABLE
from rqueue.tasks.option_values import group_of_call
from rqueue.tasks.options import JOB_ATTRIBUTES
from rqueue.timing import Timing, seconds, to_ms

if TYPE_CHECKING:
    from rqueue.tasks.definition import Task


class ScheduleOptions(TypedDict, total=False):
    """``add``'s keyword arguments (:meth:`Builder.build`'s, with their defaults there),
    spelt out so that a type checker checks ``schedules.add(..., every=300)`` as it would
    a signature (``**options: Unpack[ScheduleOptions]``)."""

    cron: str | None
    every: float | timedelta | None
    args: Sequence[Any]
    kwargs: dict[str, Any] | None
    queue: str | None
    timezone: str
    start: datetime | None
    end: datetime | None
    misfire: str
    misfire_grace: float
    paused: bool
    declared: bool


def timing_fields(
    cron: str | None,
    every: float | timedelta | None,
    timezone: str,
    start: datetime | None,
    end: datetime | None,
) -> dict[str, Any]:
    if every is not None:
        every_s = seconds(every)
        if not every_s == every_s or every_s == float("inf"):  # NaN or infinite
            raise InvalidSchedule(f"every= must be a finite number of seconds, got {every!r}")
    return {
        "cron": cron,
        "every_ms": None if every is None else round(seconds(every) * 1000),
        "timezone": timezone,
        "start_ms": None if start is None else to_ms(start),
        "end_ms": None if end is None else to_ms(end),
    }


def checked(schedule: Schedule) -> Schedule:
    """Refuse what the timing cannot: it was checked when built, before this is called."""
    if schedule.misfire not in MISFIRE_POLICIES:
        raise InvalidSchedule(
            f"misfire must be one of {MISFIRE_POLICIES}, got {schedule.misfire!r}"
        )
    if not 0 <= schedule.misfire_grace_ms <= MAX_DELAY_SECONDS * 1000:
        raise InvalidSchedule(
            "misfire_grace must be from 0 to ten years of seconds, got "
            f"{schedule.misfire_grace_ms / 1000:g}"
        )
    # refuse arguments msgpack cannot encode, now (sealed or not, they encode alike)
    encode(replace(schedule.job(0, 0, "0" * 32), encrypted=False))
    return schedule


def next_fire(timing: Timing, paused: bool, now: int) -> int | None:
    """Where a schedule saved at ``now`` goes on the timeline: None if paused, or if it
    has no run left (then it is finished)."""
    return None if paused else timing.checked().next_after(now)


def task_options(target: Task[Any, Any]) -> dict[str, Any]:
    """The options each run of a schedule of ``target`` carries, whatever its arguments:
    those of the job a dispatch through it would make (its declared options and its
    ``using()``'s), so a run carries every option a job does (rqueue/tasks/options.py).
    Only a ``retry_until`` that is not a length of time is refused: one moment, or one
    callable's, for every run."""
    until = target.options.retry_until
    if until is not None and (callable(until) or isinstance(until, datetime)):
        raise InvalidSchedule(
            f"retry_until {until!r}: a schedule's runs take it as a timedelta or seconds "
            "from each run's dispatch, not a moment or a callable"
        )
    try:
        refuse_debounced(target.name, target.options, "a schedule")
        # Dispatched at 0: its retry_until is then the length of time from each run's.
        job = target.make_job((), {}, dispatched_at=0.0, template=True)
    except InvalidTaskOption as exc:
        raise InvalidSchedule(str(exc)) from None
    carried = {a: getattr(job, a) for a in JOB_ATTRIBUTES if a not in ("queue", "retry_until")}
    return {
        **carried,
        "keep_ms": job.meta.get(KEEP, 0),
        "middleware": tuple(job.meta.get(MIDDLEWARE, ())),
        "retry_within": job.retry_until,
        "iterable": bool(job.meta.get(ITERABLE)),
        "priority": job.meta.get(PRIORITY),
        "concurrency": job.meta.get(CONCURRENCY),
        "group": job.meta.get(GROUP),
    }


def of_call(target: Task[Any, Any], args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The options that depend on the arguments (``tags=`` or ``group=`` a callable)."""
    group = target.options.group
    try:
        fields = target.options.call_fields(args, kwargs)
        if callable(group):
            fields["group"] = group_of_call(group, args, kwargs)
        return fields
    except InvalidTaskOption as exc:
        raise InvalidSchedule(str(exc)) from None


def call_options(
    target: Task[Any, Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The options each run of a schedule of ``target`` with these arguments carries."""
    return {**task_options(target), **of_call(target, args, kwargs)}


def resolve_task(target: Task[Any, Any] | str) -> Task[Any, Any]:
    if isinstance(target, str):
        return registry.lookup(target)
    if getattr(target, "name", None) and registered().get(target.name) is not None:
        return target
    raise TaskNotRegistered(f"{target!r} is not a task registered with @task")


_Target = tuple[object, "Task[Any, Any]", "Task[Any, Any]"]


class Builder:
    """Builds the new schedules of one ``add`` or ``add_many``."""

    def __init__(self, now_ms: Callable[[str], int]) -> None:
        self._now_ms = now_ms
        self._clocks: dict[str, int] = {}
        self._targets: dict[
            tuple[int, str | None], tuple[object, Task[Any, Any], Task[Any, Any]]
        ] = {}
        """(id of the task given, queue) -> (that task, kept so its id is not reused;
        the task found; the task with its queue)."""
        self._options: dict[int, dict[str, Any]] = {}
        """id of a task with its queue (kept alive in ``_targets``) -> its runs' options."""

    def build(
        self,
        name: str,
        task: Task[Any, Any] | str,
        *,
        cron: str | None = None,
        every: float | timedelta | None = None,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        queue: str | None = None,
        timezone: str = "UTC",
        start: datetime | None = None,
        end: datetime | None = None,
        misfire: str = "skip",
        misfire_grace: float = DEFAULT_MISFIRE_GRACE,
        paused: bool = False,
        declared: bool = False,
    ) -> Schedule:
        """A new schedule, validated, with its next fire time: created at Redis's clock
        of its queue's node."""
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise InvalidSchedule(f"invalid schedule name {name!r}")
        found, target = self._target(task, queue)
        if target.options.queue not in self._clocks:
            self._clocks[target.options.queue] = self._now_ms(target.options.queue)
        now = self._clocks[target.options.queue]
        if id(target) not in self._options:
            self._options[id(target)] = task_options(target)
        given = timing_fields(cron, every, timezone, start, end)
        timing = Timing(
            **given, anchor_ms=given["start_ms"] if given["start_ms"] is not None else now
        )
        next_ms = next_fire(timing, paused, now)
        return checked(
            Schedule(
                name=name,
                task=found.name,
                queue=target.options.queue,
                args=tuple(args),
                kwargs=dict(kwargs or {}),
                timing=timing,
                misfire=misfire,
                misfire_grace_ms=round(seconds(misfire_grace, "misfire_grace") * 1000),
                paused=paused,
                finished=next_ms is None and not paused,
                created_ms=now,
                declared=declared,
                next_ms=next_ms,
                **{**self._options[id(target)], **of_call(target, args, kwargs or {})},
            )
        )

    def _target(
        self, task: Task[Any, Any] | str, queue: str | None
    ) -> tuple[Task[Any, Any], Task[Any, Any]]:
        key = (id(task), queue)
        if key not in self._targets:
            found = resolve_task(task)
            self._targets[key] = (task, found, found.using(queue=queue) if queue else found)
        _, found, target = self._targets[key]
        return found, target
