"""The ranges of a task's options: checked at ``@task`` and again when decoding.

What ``@task(...)`` accepts and what a worker accepts from Redis is one rule, written
here once: a payload is hostile (it may carry inf, NaN, a bool for a number, a string
for a list), so each function takes any object and gives the checked value or raises
TypeError/ValueError naming the option at fault.
"""

from __future__ import annotations

import math
from typing import Any

from rqueue.tasks.arguments import STRINGS

MAX_TRIES = 1_000_000
"""More tries than this is taken for a mistake; the attempt counter itself is 32 bits."""
MAX_TIMEOUT_SECONDS = (2**32 - 1) / 1000
"""The payload holds a timeout as 32-bit milliseconds (about 49.7 days)."""
MAX_DELAY_SECONDS = 10 * 365 * 24 * 3600
"""A delay (``later()``, a backoff) over ten years is taken for a mistake (milliseconds
given as seconds, a wrong year)."""
MAX_TAGS = 64
MAX_TAG_LENGTH = 256
"""A call's tags (``@task(tags=...)``): labels to find it by, not data."""
MAX_HEADERS = 32
MAX_HEADER_LENGTH = 8192
"""A call's headers: trace context (W3C ``traceparent``/``tracestate``, Sentry's
``sentry-trace``/``baggage``), whose largest, ``baggage``, is at most 8192 bytes."""
EXPONENTIAL = "exponential"
EXPONENTIAL_BASE = 1.0
EXPONENTIAL_CAP = 300.0
"""``backoff="exponential"``: 1 s before the first retry, doubling, at most 5 minutes."""

Backoff = tuple[float, ...] | tuple[str, float, float]
"""Seconds before each retry (a list's last entry repeats), or ``("exponential", base,
cap)``: a plain tuple either way, so it round-trips through msgpack as a list."""


def checked_tries(tries: object) -> int:
    """``tries`` if it is an integer from 1 to MAX_TRIES, else ValueError naming it."""
    if type(tries) is not int or not 1 <= tries <= MAX_TRIES:
        raise ValueError(f"tries must be an integer from 1 to {MAX_TRIES:,}, got {tries!r}")
    return tries


def checked_priority(priority: object) -> int:
    """``priority`` if it is an integer from 0 (runs first) to 9 (runs last), else
    ValueError naming it."""
    if type(priority) is not int or not 0 <= priority <= 9:
        raise ValueError(f"priority must be an integer from 0 to 9, got {priority!r}")
    return priority


MAX_GROUP = 200
"""A group name's most characters (lua/levels.lua reads no longer one from a payload)."""


def checked_group(group: object) -> str:
    """``group`` as the name its tasks share (``using(group=)``): a non-empty string of
    printable characters, at most MAX_GROUP of them (UTF-8 bytes), or an integer (a
    tenant's id), else ValueError naming it. Printable only: the name is shown by
    ``rqueue size`` and the dashboard."""
    if type(group) is int:
        return str(group)
    if (
        not isinstance(group, str)
        or not group
        or not group.isprintable()
        or len(group.encode("utf-8")) > MAX_GROUP
    ):
        raise ValueError(
            f"group must be a non-empty string of printable characters (at most {MAX_GROUP} "
            f"bytes) or an integer, got {group!r}"
        )
    return group


def checked_timeout(timeout: object) -> float:
    """``timeout`` in seconds if the payload's millisecond field can hold it, else ValueError."""
    if not _is_number(timeout) or not 0 < timeout <= MAX_TIMEOUT_SECONDS:  # type: ignore[operator]
        raise ValueError(
            f"timeout must be a number of seconds above 0 and at most "
            f"{MAX_TIMEOUT_SECONDS:,.3f}, got {timeout!r}"
        )
    return float(timeout)  # type: ignore[arg-type]


def checked_keep(keep: object) -> float:
    """Seconds to keep a result: above 0 and at most ten years, else ValueError."""
    if not _is_number(keep) or not 0.001 <= keep <= MAX_DELAY_SECONDS:  # type: ignore[operator]
        raise ValueError(
            f"keep_result must be a number of seconds (or a timedelta) from 0.001 to "
            f"{MAX_DELAY_SECONDS:,} (ten years), got {keep!r}"
        )
    return float(keep)  # type: ignore[arg-type]


def checked_max_exceptions(count: object) -> int:
    """``max_exceptions`` if it is an integer from 1 to MAX_TRIES, else ValueError naming it."""
    if type(count) is not int or not 1 <= count <= MAX_TRIES:
        raise ValueError(
            f"max_exceptions must be an integer from 1 to {MAX_TRIES:,}, got {count!r}"
        )
    return count


def checked_retry_until(moment: object) -> float:
    """``retry_until`` as epoch seconds: a positive finite number, else ValueError."""
    if not _is_number(moment) or not 0 < moment <= 2**40:  # type: ignore[operator]
        raise ValueError(f"retry_until must be a time in epoch seconds, got {moment!r}")
    return float(moment)  # type: ignore[arg-type]


def checked_controls(controls: object) -> tuple[int | None, float | None, bool]:
    """A payload's ``controls`` map as (max_exceptions, retry_until, fail_on_timeout),
    each checked; TypeError or ValueError naming the one at fault."""
    if type(controls) is not dict:
        raise TypeError("controls must be a map")
    max_exceptions, retry_until = controls.get("max_exceptions"), controls.get("retry_until")
    fail_on_timeout = controls.get("fail_on_timeout", False)
    if type(fail_on_timeout) is not bool:
        raise TypeError(f"fail_on_timeout must be true or false, got {fail_on_timeout!r}")
    return (
        None if max_exceptions is None else checked_max_exceptions(max_exceptions),
        None if retry_until is None else checked_retry_until(retry_until),
        fail_on_timeout,
    )


def checked_backoff(backoff: object) -> Backoff:
    """Seconds before each retry, from a number or a list of numbers, or an exponential
    backoff (``"exponential"`` or ``("exponential", base, cap)``), else ValueError.

    A string is refused rather than read as a sequence: ``backoff="30"`` once became
    ``(3.0, 0.0)``.
    """
    if backoff == EXPONENTIAL:
        return (EXPONENTIAL, EXPONENTIAL_BASE, EXPONENTIAL_CAP)
    if isinstance(backoff, (list, tuple)) and backoff and backoff[0] == EXPONENTIAL:
        return _checked_exponential(backoff)
    delays = [backoff] if _is_number(backoff) else backoff
    if not isinstance(delays, (list, tuple)) or not all(
        _is_number(d) and 0 <= d <= MAX_DELAY_SECONDS for d in delays
    ):
        raise ValueError(
            "backoff must be a number of seconds or a list of them, each from 0 to "
            f"{MAX_DELAY_SECONDS:,} (ten years), or 'exponential', got {backoff!r}"
        )
    return tuple(float(d) for d in delays)


def _checked_exponential(backoff: list[Any] | tuple[Any, ...]) -> tuple[str, float, float]:
    if len(backoff) != 3 or not all(
        _is_number(d) and 0 < d <= MAX_DELAY_SECONDS for d in backoff[1:]
    ):
        raise ValueError(
            "backoff=('exponential', base, cap) needs two numbers of seconds above 0 and at "
            f"most {MAX_DELAY_SECONDS:,} (ten years), got {backoff!r}"
        )
    _, base, cap = backoff
    if base > cap:
        raise ValueError(f"backoff=('exponential', base, cap) needs base <= cap, got {backoff!r}")
    return (EXPONENTIAL, float(base), float(cap))


def checked_moment(moment: object) -> float:
    """``moment`` (epoch seconds) as a float, if finite; a float is the usual case."""
    if type(moment) is float and math.isfinite(moment):
        return moment
    if not _is_number(moment):
        raise ValueError(f"dispatched_at must be a finite number, got {moment!r}")
    return float(moment)  # type: ignore[arg-type]


def checked_tags(tags: object) -> tuple[str, ...]:
    """``tags`` as a tuple: a list of at most MAX_TAGS non-empty strings of at most
    MAX_TAG_LENGTH characters each, else ValueError naming the one at fault. A lone
    string is refused rather than read as its characters."""
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        raise ValueError(f"tags must be a list of strings, got {tags!r}")
    if len(tags) > MAX_TAGS:
        raise ValueError(f"tags must be at most {MAX_TAGS} strings, got {len(tags)}")
    for tag in tags:
        if type(tag) is not str or not 0 < len(tag) <= MAX_TAG_LENGTH:
            raise ValueError(
                f"each tag must be a string of 1 to {MAX_TAG_LENGTH} characters, got {tag!r}"
            )
    return tuple(tags)


def checked_headers(headers: object) -> dict[str, str]:
    """``headers`` if it maps at most MAX_HEADERS strings to strings of at most
    MAX_HEADER_LENGTH characters, else ValueError naming the entry at fault."""
    if type(headers) is not dict or len(headers) > MAX_HEADERS:
        raise ValueError(f"headers must be a map of at most {MAX_HEADERS} strings to strings")
    for name, value in headers.items():
        if type(name) is not str or type(value) is not str:
            raise ValueError(f"header {name!r} must be a string naming a string")
        if not 0 < len(name) <= 256 or len(value) > MAX_HEADER_LENGTH:
            raise ValueError(
                f"header {name[:40]!r} is too long (a name up to 256 characters, a value up "
                f"to {MAX_HEADER_LENGTH})"
            )
    return headers


def checked_meta(meta: object) -> dict[str, Any]:
    if type(meta) is not dict or (meta and not STRINGS.issuperset(map(type, meta))):
        raise TypeError("meta must be a map with string keys")
    return meta


def _is_number(value: object) -> bool:
    """An int or a finite float; not a bool, which is an int only by accident."""
    return type(value) is int or (type(value) is float and math.isfinite(value))
