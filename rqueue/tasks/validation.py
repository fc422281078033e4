"""Checking what a user gives a task: its options, its callables and its times.

Every check raises rqueue's own error naming the option (InvalidTaskOption, or
InvalidSchedule for a time to run at), never a bare ValueError or OverflowError from
deep inside a conversion: the message is what the user reads first.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from rqueue.encoding.ranges import MAX_DELAY_SECONDS, checked_retry_until
from rqueue.errors import Fail, InvalidSchedule, InvalidTaskOption, TaskTimeout

T = TypeVar("T")

When = datetime | timedelta | float | int
"""A time to run at: a datetime, or a timedelta or seconds from now."""


def option_checked(check: Callable[[object], T], value: object) -> T:
    """``check(value)``, its ValueError raised as rqueue's own error (it names the option)."""
    try:
        return check(value)
    except ValueError as exc:
        raise InvalidTaskOption(str(exc)) from None


def check_callable(fn: object, what: str, may_be_async: bool = False) -> None:
    """Refuse what rqueue would call and get nothing done: a generator function (async
    or not) runs none of its body when called, and the call would count as done.
    ``may_be_async``: it may be ``async def``, as tasks (async mode awaits them), hooks and
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


ExceptionClasses = tuple[type[BaseException], ...]


def exception_classes(given: object, option: str) -> ExceptionClasses:
    """``retry_for=``/``dont_retry_for=`` as a tuple of exception classes (one class
    alone is taken as one).

    Only classes: they are matched in the worker against the registered task's own
    options and never travel in a payload, so no name read from Redis is ever
    imported. What could not mean what it says is refused: a timeout
    (``fail_on_timeout=`` decides it), ``Fail`` in ``retry_for`` (it always fails at
    once), and an empty ``retry_for`` (nothing retried: ``tries=1`` says so)."""
    classes = given if isinstance(given, (tuple, list)) else (given,)
    for cls in classes:
        if isinstance(cls, type) and not issubclass(cls, BaseException):
            raise InvalidTaskOption(f"{option} takes exception classes: {cls!r} is not one")
        if not isinstance(cls, type):
            raise InvalidTaskOption(
                f"{option} takes exception classes, got {cls!r} ({type(cls).__name__}): "
                f"give the class itself, e.g. {option}=(TimeoutError,)"
            )
        if issubclass(cls, TaskTimeout):
            raise InvalidTaskOption(
                f"{option} cannot list {cls.__name__}: a timeout is retried unless the task "
                "has fail_on_timeout=True"
            )
        if option == "retry_for" and issubclass(cls, Fail):
            raise InvalidTaskOption(f"retry_for cannot list {cls.__name__}: Fail is never retried")
    if option == "retry_for" and not classes:
        raise InvalidTaskOption("retry_for=() would retry nothing: give tries=1 instead")
    return tuple(classes)


def checked_duration(name: str) -> Callable[[object], float]:
    """The check (and conversion) of a length of time in seconds or a timedelta, from
    1 ms to ten years: InvalidTaskOption naming ``name`` for anything else (NaN,
    infinity, a negative, a bool, a string)."""

    def checked(value: object) -> float:
        if isinstance(value, timedelta):
            value = value.total_seconds()
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0.001 <= value <= MAX_DELAY_SECONDS
        ):
            raise InvalidTaskOption(
                f"{name} must be a number of seconds (or a timedelta) from 0.001 to "
                f"{MAX_DELAY_SECONDS:,} (ten years), got {value!r}"
            )
        return float(value)

    return checked


def check_debounce(
    debounce: float | None, debounce_by: object, debounce_max: float | None, unique: object
) -> None:
    """The options ``debounce`` does not go with, or that need it (each checked alone
    already): InvalidTaskOption naming them."""
    if debounce is None:
        given = "debounce_by" if debounce_by is not None else "debounce_max"
        raise InvalidTaskOption(f"{given} needs debounce= (the seconds a call waits)")
    if unique is not False:
        raise InvalidTaskOption(
            "unique and debounce cannot be combined: unique keeps the first call of a "
            "key, debounce the last; choose one"
        )
    if debounce_max is not None and debounce_max < debounce:
        raise InvalidTaskOption(
            f"debounce_max ({debounce_max:g} s) must be at least debounce "
            f"({debounce:g} s): it caps the wait of a burst, which is never shorter"
        )
