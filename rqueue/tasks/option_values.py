"""How each task option a user passes is checked and turned into its value.

:class:`~rqueue.tasks.options.TaskOptions` names, for each field, a check and a
conversion (its ``Option``); the ones longer than a library call are here, so that
options.py reads as the list of options and this module as the rules of their values.
Each check raises InvalidTaskOption naming the option.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from rqueue.encoding.ranges import checked_group, checked_keep, checked_tags
from rqueue.errors import InvalidTaskOption
from rqueue.middleware.base import Middleware, carry
from rqueue.tasks.handles import Dispatched
from rqueue.tasks.validation import (
    ExceptionClasses,
    When,
    check_callable,
    exception_classes,
    option_checked,
    retry_until_at,
)
from rqueue.timing import seconds

RetryUntil = When | Callable[[], When]
"""A datetime, or a timedelta or seconds from dispatch; or a callable returning one,
called at each dispatch."""
Tags = Sequence[str] | Callable[..., Iterable[str]]
GroupKey = str | int | Callable[..., str | int]
"""A task's group (``@task(group=)``): a name, or a callable of each call's arguments."""
"""Strings, or a callable of the call's arguments returning them (Horizon tags a job
by the models it carries: ``tags=lambda order_id: [f"order:{order_id}"]``)."""


def checked(check: Callable[[object], object]) -> Callable[[object], object]:
    return partial(option_checked, check)


def hook_check(name: str) -> Callable[[object], None]:
    return partial(check_callable, what=name, may_be_async=True)  # awaited: see call_hook


def check_retry_until(until: object) -> None:
    if callable(until):
        check_callable(until, "retry_until")
    else:
        retry_until_at(until, time.time())


def retry_until_at_dispatch(until: RetryUntil, dispatched_at: float) -> float:
    """A call's retry_until in epoch seconds (a callable is called at each dispatch)."""
    return retry_until_at(until() if callable(until) else until, dispatched_at)


def check_flag(name: str, value: object) -> None:
    if type(value) is not bool:
        raise InvalidTaskOption(f"{name} must be True or False, got {value!r}")


def check_after(handles: object) -> None:
    """``after=``: handles of dispatched tasks (``dispatch()``, ``result_of()``), each
    named by its id and queue; whether each keeps its result is checked at dispatch."""
    if not isinstance(handles, tuple) or not all(isinstance(h, Dispatched) for h in handles):
        raise InvalidTaskOption(
            f"after= takes the handles of dispatched tasks (what dispatch() or "
            f"rqueue.result_of() returns), got {handles!r}"
        )


def check_unique(unique: object) -> None:
    if unique is not False and unique is not True:
        check_callable(unique, "unique")


def check_unique_until(until: object) -> None:
    if until not in ("processed", "processing"):
        raise InvalidTaskOption(f"unique_until must be 'processed' or 'processing', got {until!r}")


def check_debounce_by(key: object) -> None:
    check_callable(key, "debounce_by")


def keep_seconds(keep: object) -> float:
    return option_checked(
        checked_keep, seconds(keep, "keep_result") if isinstance(keep, timedelta) else keep
    )


def exception_classes_of(option: str) -> Callable[[object], ExceptionClasses]:
    return partial(exception_classes, option=option)


def check_tags(tags: object) -> None:
    if not callable(tags):
        option_checked(checked_tags, tags)


def given_tags(tags: Any) -> Any:
    return tags if callable(tags) else option_checked(checked_tags, tags)


def tags_of_call(tags: Tags, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[str, ...]:
    """A call's tags: the declared ones, or what the declared callable returns for its
    arguments (checked: a wrong return is the caller's error, at dispatch)."""
    if not callable(tags):
        return tuple(tags)
    returned = tags(*args, **kwargs)
    try:
        return checked_tags(list(returned) if isinstance(returned, (set, frozenset)) else returned)
    except ValueError as exc:
        raise InvalidTaskOption(f"the tags= callable returned {returned!r}: {exc}") from None


def check_group(group: object) -> None:
    if not callable(group):
        option_checked(checked_group, group)


def given_group(group: Any) -> Any:
    return group if callable(group) else option_checked(checked_group, group)


def group_of_call(
    group: Callable[..., str | int], args: Sequence[Any], kwargs: dict[str, Any]
) -> str:
    """A call's group, by the declared callable of its arguments (checked: a wrong
    return is the caller's error, at dispatch)."""
    returned = group(*args, **kwargs)
    try:
        return checked_group(returned)
    except ValueError as exc:
        raise InvalidTaskOption(f"the group= callable returned {returned!r}: {exc}") from None


def carried_stack(stack: tuple[Middleware, ...]) -> list[Any] | None:
    return [carry(m) for m in stack] or None
