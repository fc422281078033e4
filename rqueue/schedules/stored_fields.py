"""What each field of a schedule's stored definition must be, checked as it is read.

Anything read from Redis is hostile: ``Schedule.decode`` (``record.py``) refuses here,
once, a definition whose fields have the wrong type or range, instead of failing later
in every tick or on every page that shows it.
"""

from __future__ import annotations

import math
from typing import Any

from rqueue.encoding.ranges import checked_group
from rqueue.errors import InvalidSchedule
from rqueue.store.schedule_store import MAX_MS

MIN_MS = -62_135_596_800_000
"""0001-01-01T00:00:00Z, the first moment a datetime holds (a start before 1970 is one)."""


def _moment(value: object) -> bool:
    return type(value) is int and MIN_MS <= value <= MAX_MS


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_MS


def _seconds(value: object) -> bool:
    if type(value) is not int and type(value) is not float:
        return False
    number = float(value)
    return math.isfinite(number) and 0 <= number <= MAX_MS


def _text(value: object) -> bool:
    return type(value) is str


def _group(value: object) -> bool:
    try:
        return type(value) is str and checked_group(value) == value
    except ValueError:
        return False


def _flag(value: object) -> bool:
    return type(value) is bool


_FIELD_RULES: dict[str, tuple[str, Any, bool]] = {
    # field: (what it must be, its check, whether None is allowed)
    "name": ("text", _text, False),
    "task": ("text", _text, False),
    "queue": ("text", _text, False),
    "args": ("a list", lambda v: type(v) is list, True),
    "kwargs": ("a map of names", lambda v: type(v) is dict and all(map(_text, v)), True),
    "cron": ("text", _text, True),
    "every_ms": ("a whole number of ms", _count, True),
    "timezone": ("text", _text, False),
    "start_ms": ("a time in ms", _moment, True),
    "end_ms": ("a time in ms", _moment, True),
    "anchor_ms": ("a time in ms", _moment, False),
    "misfire": ("text", _text, False),
    "misfire_grace_ms": ("a whole number of ms", _count, False),
    "paused": ("true or false", _flag, False),
    "finished": ("true or false", _flag, False),
    "last_ms": ("a time in ms", _moment, True),
    "created_ms": ("a time in ms", _moment, False),
    "tries": ("a whole number", _count, True),
    "timeout": ("seconds", _seconds, True),
    "backoff": ("a list of seconds", lambda v: type(v) is list and all(map(_seconds, v)), True),
    "declared": ("true or false", _flag, False),
    "max_exceptions": ("a whole number", _count, True),
    "fail_on_timeout": ("true or false", _flag, False),
    "keep_ms": ("a whole number of ms", _count, False),
    "middleware": ("a list", lambda v: type(v) is list, True),
    "retry_within": ("seconds", _seconds, True),
    "iterable": ("true or false", _flag, False),
    "priority": ("a level from 0 to 9", lambda v: type(v) is int and 0 <= v <= 9, True),
    "concurrency": ("a whole number", _count, True),
    "group": ("a group's name", _group, True),
    "tags": ("a list", lambda v: type(v) is list, True),
    "encrypted": ("true or false", _flag, False),
    "sealed": ("sealed bytes", lambda v: type(v) is bytes, True),
}
"""What each stored field must be (``last_ms="x"`` and ``start_ms=1e20`` are refused)."""


def check_fields(stored: object) -> None:
    """Refuse (InvalidSchedule, naming the field) a stored definition, or part of one,
    whose fields are not what :data:`_FIELD_RULES` says."""
    if type(stored) is not dict:
        raise InvalidSchedule(f"a stored definition is a map, not {type(stored).__name__}")
    for name, (what, check, optional) in _FIELD_RULES.items():
        if name not in stored or (optional and stored[name] is None):
            continue
        if not check(stored[name]):
            raise InvalidSchedule(f"its {name} is not {what}: {stored[name]!r:.80}")
