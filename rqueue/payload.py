"""Payload encoding: a task call as msgpack bytes, and back.

A payload is an ordinary msgpack map, so any msgpack library can read it. Its first
three entries are a fixed-width header that the Lua scripts read and patch in place;
that layout lives in :mod:`rqueue.store.header`, and this module writes it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import msgpack

from rqueue.errors import (
    InvalidPayload,
    InvalidTaskOption,
    PayloadTooLarge,
    UnserializableArgument,
    describe,
)
from rqueue.store.header import FIXED_ENTRIES, HEADER, ID_LENGTH, ID_OFFSET, header

_ARGS = b"\xa4args"  # msgpack strings: the keys of the two entries every call packs
_KWARGS = b"\xa6kwargs"
_EMPTY_ARRAY, _EMPTY_MAP = b"\x90", b"\x80"

MAX_TRIES = 1_000_000
"""More tries than this is taken for a mistake; the attempt counter itself is 32 bits."""
MAX_TIMEOUT_SECONDS = (2**32 - 1) / 1000
"""The payload holds a timeout as 32-bit milliseconds (about 49.7 days)."""
MAX_DELAY_SECONDS = 10 * 365 * 24 * 3600
"""A delay (``later()``, a backoff) over ten years is taken for a mistake (milliseconds
given as seconds, a wrong year)."""
MAX_NESTING = 500
"""Deepest an argument may nest; msgpack decodes at most 1,024 levels, and the payload's
own map and lists take some of them."""


@dataclass(slots=True)
class Job:
    """A decoded payload: one call of a task, as a worker sees it.

    Treat it as read-only. It is not ``frozen`` only because a frozen dataclass is
    five times slower to build, and a worker builds one per task.
    """

    id: str
    task: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    queue: str
    attempts: int = 0
    tries: int | None = None
    timeout: float | None = None
    backoff: tuple[float, ...] = ()
    dispatched_at: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def backoff_for(self, attempt: int) -> float:
        """Seconds to wait before retrying after failed attempt number ``attempt`` (1-based).

        As in Laravel, a list gives one delay per retry and its last entry repeats.
        """
        if not self.backoff:
            return 0.0
        return float(self.backoff[min(attempt, len(self.backoff)) - 1])


def new_id() -> str:
    """128 random bits as 32 hex digits: what uuid4().hex gives, at a fifth of the cost."""
    return os.urandom(16).hex()


def new_ids(count: int) -> list[str]:
    """``count`` ids from one read of the system's random source."""
    digits = os.urandom(16 * count).hex()
    return [digits[i : i + ID_LENGTH] for i in range(0, len(digits), ID_LENGTH)]


class PayloadTemplate:
    """The bytes that every payload of one task, dispatched at one moment, shares.

    ``dispatch_many`` encodes thousands of calls of the same task, and only each call's
    id, args and kwargs differ. So the header (but its id) and the task's other entries
    are encoded once here, and :meth:`encode` packs just the args and kwargs. The map
    holds the fixed entries first, then the shared ones, then ``args`` and ``kwargs``.
    """

    __slots__ = ("_prefix", "_shared", "job")

    def __init__(self, job: Job) -> None:
        _check_fields(job)
        self.job = job
        shared: dict[str, Any] = {
            "task": job.task,
            "queue": job.queue,
            "tries": job.tries,
            "backoff": list(job.backoff),
            "dispatched_at": job.dispatched_at,
        }
        if job.meta:
            shared["meta"] = job.meta
        try:
            # The entries without their map's one-byte fixmap header (< 16 entries).
            self._shared = _pack(shared)[1:]
        except (TypeError, ValueError, OverflowError) as exc:
            raise UnserializableArgument(_describe_unencodable(job, exc)) from None
        self._prefix = HEADER.pack(
            0xDE,
            FIXED_ENTRIES + len(shared) + 2,
            0xA8,
            b"attempts",
            0xCE,
            job.attempts,
            0xAA,
            b"timeout_ms",
            0xCE,
            _timeout_ms(job.timeout),
            0xA2,
            b"id",
            0xD9,
            ID_LENGTH,
            b"",
        )[:ID_OFFSET]

    def encode(
        self,
        task_id: str,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        max_bytes: int | None = None,
    ) -> bytes:
        """One call's payload, naming the argument at fault if msgpack cannot encode it."""
        raw_id = task_id.encode("ascii")
        if len(raw_id) != ID_LENGTH:
            raise ValueError(f"a task id is {ID_LENGTH} ASCII characters, got {task_id!r}")
        _check_arguments(self.job.task, args, kwargs)
        try:
            packed_args = _pack(args) if args else _EMPTY_ARRAY
            packed_kwargs = _pack(kwargs) if kwargs else _EMPTY_MAP
            data = b"".join(
                (self._prefix, raw_id, self._shared, _ARGS, packed_args, _KWARGS, packed_kwargs)
            )
        except (TypeError, ValueError, OverflowError) as exc:
            job = replace(self.job, id=task_id, args=tuple(args), kwargs=kwargs)
            raise UnserializableArgument(_describe_unencodable(job, exc)) from None
        if max_bytes is not None and len(data) > max_bytes:
            raise PayloadTooLarge(
                f"task {self.job.task} encodes to {len(data)} bytes, over the limit of "
                f"{max_bytes}; pass a reference (an id or a URL) instead of the data itself"
            )
        return data


def encode(job: Job, max_bytes: int | None = None) -> bytes:
    """Encode a job, naming the argument at fault if msgpack cannot encode it."""
    return PayloadTemplate(job).encode(job.id, job.args, job.kwargs, max_bytes)


def decode(data: bytes) -> Job:
    """Decode payload bytes; anything that is not a well-formed task raises InvalidPayload.

    The bytes come from Redis, so nothing is trusted: every field is checked for its
    type and range, and the fields the scripts read from the fixed header must agree
    with the decoded ones (a later duplicate key must not smuggle in another value).
    Nothing but InvalidPayload ever leaves this function.
    """
    fixed = header(data)
    if fixed is None:
        raise InvalidPayload("not an rqueue payload (missing the fixed header)")
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=False, timestamp=3)
    except Exception as exc:
        raise InvalidPayload(f"payload is not valid msgpack: {describe(exc)[1]}") from None
    try:
        return _job(fields, fixed)
    except Exception as exc:
        raise InvalidPayload(f"payload has the wrong shape: {describe(exc)[1]}") from None


def _job(fields: dict[Any, Any], fixed: tuple[str, int, int]) -> Job:
    task_id, task, queue = fields["id"], fields["task"], fields["queue"]
    args, kwargs = fields["args"], fields["kwargs"]
    attempts, timeout_ms = fields["attempts"], fields["timeout_ms"]
    if type(args) is not list or type(kwargs) is not dict:
        raise TypeError("args must be a list and kwargs a map")
    if type(task) is not str or type(queue) is not str or type(task_id) is not str:
        raise TypeError("id, task and queue must be strings")
    if type(attempts) is not int or type(timeout_ms) is not int:
        raise TypeError("attempts and timeout_ms must be integers")
    if (task_id, attempts, timeout_ms) != fixed:
        raise ValueError("id, attempts or timeout_ms differ from the fixed header")
    if kwargs and not _STRINGS.issuperset(map(type, kwargs)):
        raise TypeError("kwargs keys must be strings")
    tries, backoff, meta = fields.get("tries"), fields.get("backoff"), fields.get("meta")
    return Job(
        task_id,
        task,
        tuple(args),
        kwargs,
        queue,
        attempts,
        None if tries is None else checked_tries(tries),
        timeout_ms / 1000 if timeout_ms else None,
        checked_backoff(backoff) if backoff else (),
        _checked_moment(fields.get("dispatched_at") or 0.0),
        _checked_meta(meta) if meta else {},
    )


def _check_fields(job: Job) -> None:
    """What decode would refuse is refused here too, naming the field: whatever encode
    accepts, decode gives back (a hand-built ``Job`` does not pass ``@task``'s checks)."""
    try:
        if type(job.task) is not str or type(job.queue) is not str:
            raise TypeError("task and queue must be strings")
        if type(job.attempts) is not int or not 0 <= job.attempts < 2**32:
            raise ValueError(
                f"attempts must be an integer from 0 to 2**32 - 1, got {job.attempts!r}"
            )
        if job.tries is not None:
            checked_tries(job.tries)
        if job.timeout is not None:
            checked_timeout(job.timeout)
        checked_backoff(job.backoff)
        _checked_moment(job.dispatched_at)
        _checked_meta(job.meta)
    except (TypeError, ValueError) as exc:
        raise InvalidTaskOption(f"task {job.task!r}: {exc}") from None


# -- the ranges of a task's options: checked at @task and again when decoding ------------


def checked_tries(tries: object) -> int:
    """``tries`` if it is an integer from 1 to MAX_TRIES, else ValueError naming it."""
    if type(tries) is not int or not 1 <= tries <= MAX_TRIES:
        raise ValueError(f"tries must be an integer from 1 to {MAX_TRIES:,}, got {tries!r}")
    return tries


def checked_timeout(timeout: object) -> float:
    """``timeout`` in seconds if the payload's millisecond field can hold it, else ValueError."""
    if not _is_number(timeout) or not 0 < timeout <= MAX_TIMEOUT_SECONDS:  # type: ignore[operator]
        raise ValueError(
            f"timeout must be a number of seconds above 0 and at most "
            f"{MAX_TIMEOUT_SECONDS:,.3f}, got {timeout!r}"
        )
    return float(timeout)  # type: ignore[arg-type]


def checked_backoff(backoff: object) -> tuple[float, ...]:
    """Seconds before each retry, from a number or a list of numbers, else ValueError.

    A string is refused rather than read as a sequence: ``backoff="30"`` once became
    ``(3.0, 0.0)``.
    """
    delays = [backoff] if _is_number(backoff) else backoff
    if not isinstance(delays, (list, tuple)) or not all(
        _is_number(d) and 0 <= d <= MAX_DELAY_SECONDS for d in delays
    ):
        raise ValueError(
            "backoff must be a number of seconds or a list of them, each from 0 to "
            f"{MAX_DELAY_SECONDS:,} (ten years), got {backoff!r}"
        )
    return tuple(float(d) for d in delays)


def _checked_moment(moment: object) -> float:
    if not _is_number(moment):
        raise ValueError(f"dispatched_at must be a finite number, got {moment!r}")
    return float(moment)  # type: ignore[arg-type]


def _checked_meta(meta: object) -> dict[str, Any]:
    if type(meta) is not dict or (meta and not _STRINGS.issuperset(map(type, meta))):
        raise TypeError("meta must be a map with string keys")
    return meta


def _is_number(value: object) -> bool:
    """An int or a finite float; not a bool, which is an int only by accident."""
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _timeout_ms(timeout: float | None) -> int:
    if timeout is None:
        return 0
    return max(1, min(round(timeout * 1000), 2**32 - 1))


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True, datetime=True)  # type: ignore[no-any-return]


# -- arguments: what a worker can get back, and naming the one it cannot ------------------


def _check_arguments(task: str, args: Any, kwargs: Any) -> None:
    """Refuse what msgpack would encode but a worker could not decode as it was given.

    The rule is that whatever encode accepts, decode gives back: so ``args`` must be a
    list or tuple and ``kwargs`` a dict with string keys, no dict key may be a list,
    tuple or dict (it comes back as a list, which cannot be a key) or NaN (it never
    equals itself), and nothing may nest deeper than MAX_NESTING. Plain scalars, the
    usual arguments, are let through without a walk.
    """
    if not isinstance(args, (list, tuple)):
        raise UnserializableArgument(
            f"the args of task {task} must be a list or tuple, got {type(args).__name__}"
        )
    if not isinstance(kwargs, dict) or (kwargs and not _STRINGS.issuperset(map(type, kwargs))):
        raise UnserializableArgument(f"the kwargs of task {task} must be a dict with string keys")
    if _SCALARS.issuperset(map(type, args)) and (
        not kwargs or _SCALARS.issuperset(map(type, kwargs.values()))
    ):
        return
    found = _find(args, kwargs, _returnable)
    if found is not None:
        raise UnserializableArgument(
            f"cannot encode argument {found[0]} of task {task}: {found[2]}"
        )


def _describe_unencodable(job: Job, exc: Exception) -> str:
    found = _find(job.args, job.kwargs, _encodable)
    if found is None:
        return f"cannot encode the arguments of task {job.task}: {exc}"
    path, value, _ = found
    kind = type(value).__name__
    hint = ""
    if isinstance(value, datetime) and value.tzinfo is None:
        hint = " (naive datetimes are refused: attach a timezone)"
    elif isinstance(value, int):
        hint = " (integers must fit in 64 bits)"
    elif isinstance(value, str):
        hint = " (it holds a lone surrogate, which UTF-8 cannot encode)"
    return (
        f"cannot encode argument {path} of task {job.task}: {kind} value is not supported "
        f"by msgpack{hint}; pass None, bool, int, float, str, bytes, lists, dicts "
        "or timezone-aware datetimes"
    )


_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})
_STRINGS = frozenset({str})
_Link = tuple["_Link | None", str]
"""A path as a chain of (parent, step): the text is built only for the value at fault."""


def _find(
    args: Sequence[Any], kwargs: dict[str, Any], fault: Callable[[Any, bool], str | None]
) -> tuple[str, Any, str] | None:
    """``(path, value, why)`` of the first value ``fault`` objects to, walking depth first.

    Iterative, so arguments nested thousands deep get a clear answer, not a
    RecursionError. ``fault(value, is_key)`` sees every value and every dict key.
    """
    roots: list[tuple[Any, _Link]] = [(v, (None, f"args[{i}]")) for i, v in enumerate(args)]
    roots += [(v, (None, f"kwargs[{k!r}]")) for k, v in kwargs.items()]
    stack = [(value, link, 1, False) for value, link in reversed(roots)]
    while stack:
        value, link, depth, is_key = stack.pop()
        why = fault(value, is_key)
        if why is not None:
            return _path(link), value, why
        if isinstance(value, (list, tuple, dict)) and depth > MAX_NESTING:
            return _root(link), value, f"it nests deeper than {MAX_NESTING} levels"
        if isinstance(value, (list, tuple)):
            if not _SCALARS.issuperset(map(type, value)):
                children = [(v, (link, f"[{i}]"), depth + 1, False) for i, v in enumerate(value)]
                stack.extend(reversed(children))
        elif isinstance(value, dict):
            entries: list[tuple[Any, _Link, int, bool]] = []
            for key, item in value.items():
                entries.append((key, (link, f" key {key!r}"), depth + 1, True))
                entries.append((item, (link, f"[{key!r}]"), depth + 1, False))
            stack.extend(reversed(entries))
    return None


def _returnable(value: Any, is_key: bool) -> str | None:
    if not is_key:
        return None
    if isinstance(value, (list, tuple, dict)):
        return (
            f"a dict key that is a {type(value).__name__} would reach the worker as a list, "
            "which cannot be a key; use a string or a number"
        )
    if isinstance(value, float) and math.isnan(value):
        return "a NaN dict key never equals itself, so the worker could not look it up"
    return None


def _encodable(value: Any, is_key: bool) -> str | None:
    if isinstance(value, (list, tuple, dict, float)):
        return None
    try:
        _pack(value)
    except (TypeError, ValueError, OverflowError):
        return "not supported by msgpack"
    return None


def _path(link: _Link) -> str:
    steps: list[str] = []
    current: _Link | None = link
    while current is not None:
        current, step = current
        steps.append(step)
    return "".join(reversed(steps))


def _root(link: _Link) -> str:
    current = link
    while current[0] is not None:
        current = current[0]
    return current[1]
