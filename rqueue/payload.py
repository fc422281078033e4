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
from datetime import datetime
from typing import Any

import msgpack

from rqueue.errors import InvalidPayload, PayloadTooLarge, UnserializableArgument
from rqueue.store.header import FIXED_ENTRIES, HEADER, ID_LENGTH, ID_OFFSET, has_header

_ARGS = b"\xa4args"  # msgpack strings: the keys of the two entries every call packs
_KWARGS = b"\xa6kwargs"
_EMPTY_ARRAY, _EMPTY_MAP = b"\x90", b"\x80"


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
    """Decode payload bytes; anything that is not a well-formed task raises InvalidPayload."""
    if not has_header(data):
        raise InvalidPayload("not an rqueue payload (missing the fixed header)")
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=False, timestamp=3)
    except Exception as exc:
        raise InvalidPayload(f"payload is not valid msgpack: {exc}") from None
    try:
        task_id, task, queue = fields["id"], fields["task"], fields["queue"]
        args, kwargs = fields["args"], fields["kwargs"]
        if type(args) is not list or type(kwargs) is not dict:
            raise TypeError("args must be a list and kwargs a map")
        if type(task) is not str or type(queue) is not str or type(task_id) is not str:
            raise TypeError("id, task and queue must be strings")
        for key in kwargs:
            if type(key) is not str:
                raise TypeError("kwargs keys must be strings")
        tries, backoff, meta = fields.get("tries"), fields.get("backoff"), fields.get("meta")
        timeout_ms = int(fields["timeout_ms"])
        return Job(
            task_id,
            task,
            tuple(args),
            kwargs,
            queue,
            int(fields["attempts"]),
            None if tries is None else int(tries),
            timeout_ms / 1000 if timeout_ms else None,
            tuple(map(float, backoff)) if backoff else (),
            float(fields.get("dispatched_at") or 0.0),
            dict(meta) if meta else {},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidPayload(f"payload has the wrong shape: {exc!r}") from None


def _timeout_ms(timeout: float | None) -> int:
    if timeout is None:
        return 0
    return max(1, min(round(timeout * 1000), 2**32 - 1))


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True, datetime=True)  # type: ignore[no-any-return]


def _describe_unencodable(job: Job, exc: Exception) -> str:
    path, value = _find_unencodable(job.args, job.kwargs)
    if path is None:
        return f"cannot encode the arguments of task {job.task}: {exc}"
    kind = type(value).__name__
    hint = ""
    if isinstance(value, datetime) and value.tzinfo is None:
        hint = " (naive datetimes are refused: attach a timezone)"
    elif isinstance(value, int):
        hint = " (integers must fit in 64 bits)"
    return (
        f"cannot encode argument {path} of task {job.task}: {kind} value is not supported "
        f"by msgpack{hint}; pass None, bool, int, float, str, bytes, lists, dicts "
        "or timezone-aware datetimes"
    )


def _find_unencodable(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str | None, Any]:
    for index, value in enumerate(args):
        found = _walk(value, f"args[{index}]")
        if found[0] is not None:
            return found
    for key, value in kwargs.items():
        found = _walk(value, f"kwargs[{key!r}]")
        if found[0] is not None:
            return found
    return None, None


def _walk(value: Any, path: str) -> tuple[str | None, Any]:
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _walk(item, f"{path}[{index}]")
            if found[0] is not None:
                return found
        return None, None
    if isinstance(value, dict):
        for key, item in value.items():
            key_found = _walk(key, f"{path} key {key!r}")
            if key_found[0] is not None:
                return key_found
            found = _walk(item, f"{path}[{key!r}]")
            if found[0] is not None:
                return found
        return None, None
    if isinstance(value, float) and not math.isfinite(value):
        return None, None
    try:
        _pack(value)
    except (TypeError, ValueError, OverflowError):
        return path, value
    return None, None
