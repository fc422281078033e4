"""Payload encoding: a task call as msgpack bytes, and back.

A payload is an ordinary msgpack array, so any msgpack library can read it:
``[attempts, timeout_ms, id, task, queue, dispatched_at, args, kwargs, options]``
(and a signature, when signing is on). Its first three elements are a fixed-width
header that the Lua scripts read and patch in place; that layout lives in
:mod:`rqueue.store.header`, and this module writes it. ``options`` is a map of what a
call sets beyond those (``tries``, ``backoff``, ``meta``, ``controls``), empty for a
plain call: every pending task is stored in Redis, so each byte counts (issue #16). Values
msgpack has no type for (a Decimal, a UUID, a registered dataclass) travel as the
extension types of :mod:`rqueue.encoding.codec`.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack

from rqueue.encoding.codec import pack, unpack
from rqueue.errors import (
    InvalidPayload,
    InvalidTaskOption,
    PayloadTooLarge,
    UnserializableArgument,
    describe,
)
from rqueue.store.header import (
    ARRAY,
    HEADER,
    ID_LENGTH,
    ID_OFFSET,
    RAW_ID_LENGTH,
    SMALLEST,
    header,
    raw_id,
)
from rqueue.tasks.arguments import STRINGS, check_arguments, describe_unencodable
from rqueue.tasks.progress import report

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
EXPONENTIAL = "exponential"
EXPONENTIAL_BASE = 1.0
EXPONENTIAL_CAP = 300.0
"""``backoff="exponential"``: 1 s before the first retry, doubling, at most 5 minutes."""

Backoff = tuple[float, ...] | tuple[str, float, float]
"""Seconds before each retry (a list's last entry repeats), or ``("exponential", base,
cap)``: a plain tuple either way, so it round-trips through msgpack as a list."""


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
    backoff: Backoff = ()
    dispatched_at: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    max_exceptions: int | None = None
    """Exceptions (not timeouts) after which it fails even with tries left."""
    retry_until: float | None = None
    """Epoch seconds after which it is not retried, nor started."""
    fail_on_timeout: bool = False

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

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Say how far this run has come: ``fraction`` from 0 to 1, and a short message
        (``current_job().progress(0.4, "resized 4 of 10")``). ``handle.progress()``
        and ``rqueue status`` read it; with ``rqueue work --events`` it is an event too.
        One round trip to Redis in a worker; kept in memory by ``rqueue.testing``."""
        report(self.queue, self.id, self.task, self.attempts, fraction, message)

    def backoff_for(self, attempt: int) -> float:
        """Seconds to wait before retrying after failed attempt number ``attempt`` (1-based).

        As in Laravel, a list gives one delay per retry and its last entry repeats.
        Exponential is ``min(cap, base * 2**(attempt - 1))`` with full jitter (a
        uniform pick from 0 to that), so tasks that failed together do not all come
        back together.
        """
        backoff = self.backoff
        if not backoff:
            return 0.0
        if backoff[0] == EXPONENTIAL:
            _, base, cap = backoff
            return random.uniform(0.0, min(float(cap), float(base) * 2.0 ** min(attempt - 1, 64)))
        return float(backoff[min(attempt, len(backoff)) - 1])


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
    id, args and kwargs differ. So the header (but its id), the task, queue and time,
    and the options are encoded once here, and :meth:`encode` packs just the args and
    kwargs between them.
    """

    __slots__ = ("_options", "_prefix", "_shared", "job")

    def __init__(self, job: Job) -> None:
        _check_fields(job)
        self.job = job
        options: dict[str, Any] = {}
        if job.tries is not None:
            options["tries"] = job.tries
        if job.backoff:
            options["backoff"] = list(job.backoff)
        if job.meta:
            options["meta"] = job.meta
        if job.max_exceptions is not None or job.retry_until is not None or job.fail_on_timeout:
            options["controls"] = {
                "max_exceptions": job.max_exceptions,
                "retry_until": job.retry_until,
                "fail_on_timeout": job.fail_on_timeout,
            }
        try:
            self._shared = pack(job.task) + pack(job.queue) + pack(float(job.dispatched_at))
            self._options = pack(options)
        except (TypeError, ValueError, OverflowError) as exc:
            raise UnserializableArgument(
                describe_unencodable(job.task, job.args, job.kwargs, exc)
            ) from None
        self._prefix = HEADER.pack(
            ARRAY | SMALLEST,
            0xCE,
            job.attempts,
            0xCE,
            _timeout_ms(job.timeout),
            0xC4,
            RAW_ID_LENGTH,
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
        stored_id = raw_id(task_id)
        check_arguments(self.job.task, args, kwargs)
        try:
            packed_args = pack(args) if args else _EMPTY_ARRAY
            packed_kwargs = pack(kwargs) if kwargs else _EMPTY_MAP
            data = b"".join(
                (self._prefix, stored_id, self._shared, packed_args, packed_kwargs, self._options)
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
        fields = unpack(data)
    except InvalidPayload:
        raise  # an argument type it cannot decode: the codec says which and why
    except Exception as exc:
        raise InvalidPayload(f"payload is not valid msgpack: {describe(exc)[1]}") from None
    try:
        return _job(fields, fixed)
    except Exception as exc:
        raise InvalidPayload(f"payload has the wrong shape: {describe(exc)[1]}") from None


def task_name(data: bytes) -> str | None:
    """The task a payload names, read without decoding its arguments (their types may
    not be registered yet); None if it names none."""
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=False, timestamp=3)
    except Exception:
        return None
    name = fields[3] if type(fields) is list and len(fields) > 3 else None
    return name if type(name) is str else None


def _job(fields: Any, fixed: tuple[str, int, int]) -> Job:
    if type(fields) is not list or not SMALLEST <= len(fields) <= SMALLEST + 1:
        raise ValueError(f"a payload is an array of {SMALLEST} elements (a 10th when signed)")
    attempts, timeout_ms, stored_id, task, queue, dispatched_at, args, kwargs, options = fields[
        :SMALLEST
    ]
    if type(stored_id) is not bytes or type(options) is not dict:
        raise TypeError("the id must be bytes and the options a map")
    task_id = stored_id.hex()
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
    tries, backoff, meta = options.get("tries"), options.get("backoff"), options.get("meta")
    controls = options.get("controls")
    job = Job(
        task_id,
        task,
        tuple(args),
        kwargs,
        queue,
        attempts,
        None if tries is None else checked_tries(tries),
        timeout_ms / 1000 if timeout_ms else None,
        checked_backoff(backoff) if backoff else (),
        _checked_moment(dispatched_at or 0.0),
        checked_meta(meta) if meta else {},
    )
    if controls is not None:
        job.max_exceptions, job.retry_until, job.fail_on_timeout = checked_controls(controls)
    return job


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
        checked_meta(job.meta)
        if job.max_exceptions is not None:
            checked_max_exceptions(job.max_exceptions)
        if job.retry_until is not None:
            checked_retry_until(job.retry_until)
        if type(job.fail_on_timeout) is not bool:
            raise TypeError(f"fail_on_timeout must be True or False, got {job.fail_on_timeout!r}")
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


def _checked_moment(moment: object) -> float:
    if not _is_number(moment):
        raise ValueError(f"dispatched_at must be a finite number, got {moment!r}")
    return float(moment)  # type: ignore[arg-type]


def checked_meta(meta: object) -> dict[str, Any]:
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
