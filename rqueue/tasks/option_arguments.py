"""The options ``@task(...)`` and ``using(...)`` take, as users type them: the types
mypy checks a call against. options.py checks on import that each argument here sets
a ``TaskOptions`` field, and turns the values given into those fields."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Literal, TypedDict

from rqueue.middleware.base import Middleware
from rqueue.tasks.hooks import Hook
from rqueue.tasks.option_values import GroupKey, RetryUntil, Tags

if TYPE_CHECKING:
    from rqueue.store.queue import RedisQueue
    from rqueue.tasks.handles import Dispatched

BackoffOption = float | Sequence[float] | str | tuple[str, float, float]
"""Seconds, a list of them, ``"exponential"`` or ``("exponential", base, cap)``."""
UniqueKey = bool | Callable[..., object]
"""``True`` (one per task) or a callable of the call's arguments returning its key."""
UniqueUntil = Literal["processed", "processing"]
DebounceKey = Callable[..., object]
"""A callable of the call's arguments returning its debounce key (a str or an int)."""


class TaskArguments(TypedDict, total=False):
    """The options ``@task(...)`` takes, as users type them."""

    queue: str
    tries: int | None
    backoff: BackoffOption
    timeout: float | None
    after_succeeded: Hook | None
    after_failed: Hook | None
    after_cancelled: Hook | None
    keep_result: float | timedelta | None
    max_exceptions: int | None
    retry_until: RetryUntil | None
    fail_on_timeout: bool
    encrypted: bool
    middleware: Sequence[Middleware]
    concurrency: int | None
    unique: UniqueKey
    unique_for: float | timedelta
    unique_until: UniqueUntil
    tags: Tags
    retry_for: type[BaseException] | Sequence[type[BaseException]] | None
    dont_retry_for: type[BaseException] | Sequence[type[BaseException]]
    debounce: float | timedelta | None
    debounce_by: DebounceKey | None
    debounce_max: float | timedelta | None
    iterable: bool
    priority: int | None
    group: GroupKey | None


class UsingArguments(TypedDict, total=False):
    """The options ``using(...)`` overrides, as users type them (None: not overridden)."""

    queue: str | None
    tries: int | None
    timeout: float | None
    backoff: BackoffOption | None
    connection: RedisQueue | None
    wait_replicas: int | None
    keep_result: float | timedelta | None
    max_exceptions: int | None
    retry_until: RetryUntil | None
    fail_on_timeout: bool | None
    encrypted: bool | None
    middleware: Sequence[Middleware] | None
    concurrency: int | None
    tags: Tags | None
    after: Sequence[Dispatched] | None
    allow_failures: bool | None
    priority: int | None
    group: GroupKey | None
