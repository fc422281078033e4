"""Payload encoding: a task call as msgpack bytes, and back.

A payload is an ordinary msgpack array, so any msgpack library can read it:
``[attempts, timeout_ms, id, task, queue, dispatched_at, args, kwargs, options]``
(and a signature, when signing is on). Its first three elements are a fixed-width
header that the Lua scripts read and patch in place; that layout lives in
:mod:`rqueue.store.header`, and this module writes it. ``options`` is a map of what a
call sets beyond those (``tries``, ``backoff``, ``meta``, ``controls``, ``tags``,
``headers``), empty for a plain call: every pending task is stored in Redis, so each
byte counts (issue #16); the options' ranges are in :mod:`rqueue.encoding.ranges`. Values
msgpack has no type for (a Decimal, a UUID, a registered dataclass) travel as the
extension types of :mod:`rqueue.encoding.codec`.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

import msgpack

from rqueue.encoding.codec import pack, unpack
from rqueue.encoding.ranges import (
    EXPONENTIAL,
    Backoff,
    checked_backoff,
    checked_controls,
    checked_headers,
    checked_max_exceptions,
    checked_meta,
    checked_moment,
    checked_retry_until,
    checked_tags,
    checked_timeout,
    checked_tries,
)
from rqueue.encoding.sealed_args import open_arguments, seal_arguments
from rqueue.encoding.sealing import Keyring, NotDecrypted, Sealed, must_seal
from rqueue.errors import (
    Fail,
    InvalidPayload,
    InvalidTaskOption,
    PayloadTooLarge,
    TaskCancelled,
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
from rqueue.store.keys import PLAIN_LEVEL, Lane
from rqueue.tasks.arguments import STRINGS, check_arguments, describe_unencodable
from rqueue.tasks.progress import report

_EMPTY_ARRAY, _EMPTY_MAP = b"\x90", b"\x80"

KEEP = "keep"
"""The ``meta`` entry of a call that keeps its result: milliseconds to keep it."""
PRIORITY = "priority"
"""The ``meta`` entry of a call with a priority level other than 5 (``@task(priority=)``):
the scripts that put a task back on its queue read it there (lua/levels.lua)."""
GROUP = "group"
"""The ``meta`` entry of a call in a fair group (``using(group=)``): its name, which the
scripts that put a task back on its queue read there too (lua/levels.lua)."""
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
    backoff: Backoff = ()
    dispatched_at: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    max_exceptions: int | None = None
    """Exceptions (not timeouts) after which it fails even with tries left."""
    retry_until: float | None = None
    """Epoch seconds after which it is not retried, nor started."""
    fail_on_timeout: bool = False
    tags: tuple[str, ...] = ()
    """Labels to find it by (``rqueue failed list --tag``, the dashboard's search)."""
    headers: dict[str, str] | None = None
    """Context its producer passes to its attempts, as tracing carries it: the trace
    it continues (rqueue/contrib/). Strings only, never code; None: none (a worker
    decodes one per task, so no empty map is made for each)."""
    encrypted: bool = False
    """Its arguments travel sealed and its kept result is kept sealed
    (``@task(encrypted=True)``, rqueue/encoding/sealing.py)."""
    _sealed: bytes | None = field(init=False, repr=False, compare=False)
    """Its sealed arguments while this process could not open them; never set
    otherwise, so a plain job costs nothing more to build (read through :attr:`sealed`)."""
    _cancel_requested: bool = field(init=False, repr=False, compare=False)
    """Set by the worker once this run's cancel reaches it; never set otherwise, so a
    job costs nothing more to build (read through :attr:`cancelled`)."""

    @property
    def sealed(self) -> bool:
        """True if its arguments are encrypted and this process had no key to open them:
        ``args`` and ``kwargs`` are then empty, and what shows them says ``encrypted``."""
        return getattr(self, "_sealed", None) is not None

    @property
    def cancelled(self) -> bool:
        """True once this run was asked to stop (``handle.cancel()``, ``rqueue cancel``):
        a task in a thread (``--threads``) or a long loop looks here between steps."""
        return getattr(self, "_cancel_requested", False)

    def check_cancelled(self) -> None:
        """Raise ``TaskCancelled`` if this run was asked to stop: the run then ends as
        ``cancelled``, not retried (``current_job().check_cancelled()``)."""
        if getattr(self, "_cancel_requested", False):
            raise TaskCancelled(f"task {self.id} was cancelled while it ran")

    def request_cancel(self) -> None:
        """The worker delivers this run's cancel (``worker/cancels.py``)."""
        self._cancel_requested = True

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

    def fail(self, reason: str | None = None) -> NoReturn:
        """Fail this run at once, whatever tries it has left: raises :class:`Fail`
        (``current_job().fail("the account was closed")``); to name the exception
        that made it fail in its message, ``raise Fail(reason) from exc`` instead."""
        raise Fail(reason)

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


def lane_of(meta: Mapping[str, Any]) -> Lane:
    """The lane a call's payload is pushed onto, by its ``meta``: its priority level's
    if it has one, else its group's, else level 5's (lua/levels.lua reads it the same
    way: a group's turns are within level 5)."""
    level, group = meta.get(PRIORITY, PLAIN_LEVEL), meta.get(GROUP)
    return group if level == PLAIN_LEVEL and isinstance(group, str) else int(level)


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
    kwargs between them. A plain task keeps one for all its dispatches
    (``Task.dispatch``), each giving its own time.
    """

    __slots__ = ("_at", "_encrypted", "_named", "_options", "_prefix", "job")

    def __init__(self, job: Job) -> None:
        _check_fields(job)
        self.job = job
        self._encrypted = job.encrypted
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
        if job.tags:
            options["tags"] = list(job.tags)
        if job.headers:
            options["headers"] = job.headers
        try:
            self._named = pack(job.task) + pack(job.queue)
            self._at = pack(float(job.dispatched_at))
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
        dispatched_at: float | None = None,
        keyring: Keyring | None = None,
    ) -> bytes:
        """One call's payload, naming the argument at fault if msgpack cannot encode it;
        ``dispatched_at`` (epoch seconds) if not the template's job's. Its arguments are
        sealed with ``keyring`` if its job is encrypted or the keyring encrypts all
        (EncryptionUnavailable if it must be and there is none)."""
        stored_id = raw_id(task_id)
        check_arguments(self.job.task, args, kwargs)
        try:
            at = self._at if dispatched_at is None else pack(dispatched_at)
            packed_args = pack(args) if args else _EMPTY_ARRAY
            packed_kwargs = pack(kwargs) if kwargs else _EMPTY_MAP
            if must_seal(self._encrypted, keyring):
                job = self.job
                packed = packed_args + packed_kwargs
                packed_args = seal_arguments(keyring, job.queue, stored_id, job.task, packed)
                packed_kwargs = _EMPTY_MAP
            data = b"".join(
                (
                    self._prefix,
                    stored_id,
                    self._named,
                    at,
                    packed_args,
                    packed_kwargs,
                    self._options,
                )
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


def encode(job: Job, max_bytes: int | None = None, keyring: Keyring | None = None) -> bytes:
    """Encode a job, naming the argument at fault if msgpack cannot encode it (its
    arguments sealed with ``keyring`` if they must be: see PayloadTemplate.encode)."""
    return PayloadTemplate(job).encode(job.id, job.args, job.kwargs, max_bytes, None, keyring)


def decode(
    data: bytes, fixed: tuple[str, int, int] | None = None, keyring: Keyring | None = None
) -> Job:
    """Decode payload bytes; anything that is not a well-formed task raises InvalidPayload.

    The bytes come from Redis, so nothing is trusted: every field is checked for its
    type and range, and the fields the scripts read from the fixed header must agree
    with the decoded ones (a later duplicate key must not smuggle in another value).
    Nothing but InvalidPayload ever leaves this function. ``fixed`` is the header if
    the caller read it already (a worker does, for every task it reserves).

    An encrypted call's arguments are opened with ``keyring`` (NotDecrypted, an
    InvalidPayload, if they do not open); without one its job comes back ``sealed``,
    its arguments empty, for whatever shows it to say ``encrypted``.
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
        return _job(fields, fixed, keyring)
    except InvalidPayload:
        raise  # sealed arguments that do not open (NotDecrypted) or decode: it says why
    except Exception as exc:
        raise InvalidPayload(f"payload has the wrong shape: {describe(exc)[1]}") from None


def readable(data: bytes, keyring: Keyring | None) -> Job:
    """The job in ``data`` for showing it: its arguments decrypted with ``keyring``, or
    left ``sealed`` (shown ``encrypted``) if there is none or they do not decrypt with
    it. A worker uses ``decode``, which refuses what does not decrypt."""
    try:
        return decode(data, None, keyring)
    except NotDecrypted:
        return decode(data)


def task_name(data: bytes) -> str | None:
    """The task a payload names, read without decoding its arguments (their types may
    not be registered yet); None if it names none."""
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=False, timestamp=3)
    except Exception:
        return None
    name = fields[3] if type(fields) is list and len(fields) > 3 else None
    return name if type(name) is str else None


def _job(fields: Any, fixed: tuple[str, int, int], keyring: Keyring | None) -> Job:
    if type(fields) is not list or not SMALLEST <= len(fields) <= SMALLEST + 1:
        raise ValueError(f"a payload is an array of {SMALLEST} elements (a 10th when signed)")
    attempts, timeout_ms, stored_id, task, queue, dispatched_at, args, kwargs, options = fields[
        :SMALLEST
    ]
    if type(stored_id) is not bytes or type(options) is not dict:
        raise TypeError("the id must be bytes and the options a map")
    task_id = stored_id.hex()
    sealed = None
    if type(args) is not list or type(kwargs) is not dict:
        if type(args) is not Sealed or kwargs != {}:
            raise TypeError("args must be a list and kwargs a map")
        sealed, args = args.blob, []  # an encrypted call: opened by decode
    if type(task) is not str or type(queue) is not str or type(task_id) is not str:
        raise TypeError("id, task and queue must be strings")
    if type(attempts) is not int or type(timeout_ms) is not int:
        raise TypeError("attempts and timeout_ms must be integers")
    if (task_id, attempts, timeout_ms) != fixed:
        raise ValueError("id, attempts or timeout_ms differ from the fixed header")
    if kwargs and not STRINGS.issuperset(map(type, kwargs)):
        raise TypeError("kwargs keys must be strings")
    job = Job(
        task_id,
        task,
        tuple(args),
        kwargs,
        queue,
        attempts,
        None,
        timeout_ms / 1000 if timeout_ms else None,
        (),
        checked_moment(dispatched_at or 0.0),
    )
    if options:  # a plain call's is empty: nothing more to read
        _read_options(job, options)
    if sealed is not None:  # opened with the keyring, else left sealed
        job.encrypted = True
        if keyring is None:
            job._sealed = sealed
        else:
            job.args, job.kwargs = open_arguments(keyring, sealed, queue, stored_id, task)
    return job


def _read_options(job: Job, options: dict[Any, Any]) -> None:
    """Set ``job``'s fields from its payload's options map, each checked."""
    tries, backoff, meta = options.get("tries"), options.get("backoff"), options.get("meta")
    if tries is not None:
        job.tries = checked_tries(tries)
    if backoff:
        job.backoff = checked_backoff(backoff)
    if meta:
        job.meta = checked_meta(meta)
    controls, tags, headers = options.get("controls"), options.get("tags"), options.get("headers")
    if controls is not None:
        job.max_exceptions, job.retry_until, job.fail_on_timeout = checked_controls(controls)
    if tags:
        job.tags = checked_tags(tags)
    if headers:
        job.headers = checked_headers(headers)


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
        checked_moment(job.dispatched_at)
        checked_meta(job.meta)
        if job.max_exceptions is not None:
            checked_max_exceptions(job.max_exceptions)
        if job.retry_until is not None:
            checked_retry_until(job.retry_until)
        if type(job.fail_on_timeout) is not bool:
            raise TypeError(f"fail_on_timeout must be True or False, got {job.fail_on_timeout!r}")
        if type(job.tags) is not tuple:
            raise TypeError(f"tags must be a tuple of strings, got {job.tags!r}")
        checked_tags(job.tags)
        if job.headers is not None:
            checked_headers(job.headers)
    except (TypeError, ValueError) as exc:
        raise InvalidTaskOption(f"task {job.task!r}: {exc}") from None


def _timeout_ms(timeout: float | None) -> int:
    if timeout is None:
        return 0
    return max(1, min(round(timeout * 1000), 2**32 - 1))
