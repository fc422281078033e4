"""Payload encoding: a task call as msgpack bytes, and back.

A payload is an ordinary msgpack map, so any msgpack library can read it. Its first
three entries are a fixed-width header that the Lua scripts read and patch in place;
that layout lives in :mod:`rqueue.store.header`, and this module writes it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack

from rqueue.arguments import STRINGS, check_arguments, describe_unencodable
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
KEEP = "keep"
"""The ``meta`` entry of a call that keeps its result: milliseconds to keep it."""
CHAIN = "chain"
"""The ``meta`` entry of a chain's steps still to come (rqueue/workflows/)."""


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

    @property
    def chain(self) -> ChainSteps:
        """The steps of its chain still to come, which a running step may change:
        ``current_job().chain.append(task.pending(...))`` or ``.prepend(...)``
        (Laravel's ``appendToChain`` and ``prependToChain``). They are dispatched, one
        after another, once this job succeeds."""
        steps = self.meta.get(CHAIN)
        if not isinstance(steps, ChainSteps):
            steps = self.meta[CHAIN] = ChainSteps(steps if isinstance(steps, list) else [])
        return steps

    def backoff_for(self, attempt: int) -> float:
        """Seconds to wait before retrying after failed attempt number ``attempt`` (1-based).

        As in Laravel, a list gives one delay per retry and its last entry repeats.
        """
        if not self.backoff:
            return 0.0
        return float(self.backoff[min(attempt, len(self.backoff)) - 1])


class ChainSteps(list[Any]):
    """A list with ``prepend``: what :attr:`Job.chain` gives a running step."""

    def prepend(self, step: Any) -> None:
        self.insert(0, step)


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
            raise UnserializableArgument(
                describe_unencodable(job.task, job.args, job.kwargs, exc)
            ) from None
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
        check_arguments(self.job.task, args, kwargs)
        try:
            packed_args = _pack(args) if args else _EMPTY_ARRAY
            packed_kwargs = _pack(kwargs) if kwargs else _EMPTY_MAP
            data = b"".join(
                (self._prefix, raw_id, self._shared, _ARGS, packed_args, _KWARGS, packed_kwargs)
            )
        except (TypeError, ValueError, OverflowError) as exc:
            job = replace(self.job, id=task_id, args=tuple(args), kwargs=kwargs)
            raise UnserializableArgument(
                describe_unencodable(job.task, job.args, job.kwargs, exc)
            ) from None
        if max_bytes is not None and len(data) > max_bytes:
            raise PayloadTooLarge(
                f"task {self.job.task} encodes to {len(data)} bytes, over the limit of "
                f"{max_bytes}; pass a reference (an id or a URL) instead of the data itself"
            )
        return data


def encode(job: Job, max_bytes: int | None = None) -> bytes:
    """Encode a job, naming the argument at fault if msgpack cannot encode it."""
    return PayloadTemplate(job).encode(job.id, job.args, job.kwargs, max_bytes)


def decode(data: bytes, fixed: tuple[str, int, int] | None = None) -> Job:
    """Decode payload bytes; anything that is not a well-formed task raises InvalidPayload.

    The bytes come from Redis, so nothing is trusted: every field is checked for its
    type and range, and the fields the scripts read from the fixed header must agree
    with the decoded ones (a later duplicate key must not smuggle in another value).
    Nothing but InvalidPayload ever leaves this function. ``fixed`` is the header if
    the caller read it already (a worker does, for every task it reserves).
    """
    if fixed is None:
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
    if kwargs and not STRINGS.issuperset(map(type, kwargs)):
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


def checked_keep(keep: object) -> float:
    """Seconds to keep a result: above 0 and at most ten years, else ValueError."""
    if not _is_number(keep) or not 0.001 <= keep <= MAX_DELAY_SECONDS:  # type: ignore[operator]
        raise ValueError(
            f"keep_result must be a number of seconds (or a timedelta) from 0.001 to "
            f"{MAX_DELAY_SECONDS:,} (ten years), got {keep!r}"
        )
    return float(keep)  # type: ignore[arg-type]


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
    if type(meta) is not dict or (meta and not STRINGS.issuperset(map(type, meta))):
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
