"""One schedule as stored in Redis: its definition, timing and the call it makes.

A plain record; reading and writing it in Redis is :mod:`rqueue.schedules.api`, firing
it is :mod:`rqueue.schedules.scheduler`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

import msgpack

from rqueue.encoding.payload import GROUP, KEEP, PRIORITY, Job, new_id
from rqueue.encoding.ranges import Backoff, checked_tags
from rqueue.encoding.sealing import (
    KEYS_SETTING,
    EncryptionUnavailable,
    Keyring,
    no_key_to_seal,
    schedule_data,
)
from rqueue.errors import InvalidSchedule, describe
from rqueue.middleware.base import MIDDLEWARE
from rqueue.middleware.stacks import CONCURRENCY
from rqueue.schedules.stored_fields import check_fields
from rqueue.tasks.iterable import ITERABLE
from rqueue.timing import Timing, from_ms, iso

OVERDUE_AFTER_MS = 10_000
"""How late a next run may be before a listing calls it overdue (or its misfire grace,
if longer): a tick or two of a busy worker."""
MISFIRE_POLICIES = ("skip", "all")
DEFAULT_MISFIRE_GRACE = 60.0
"""Seconds a trigger may be late and still count as on time (Quartz's misfireThreshold)."""


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Schedule:
    """One schedule as stored; times are Unix milliseconds (Redis clock)."""

    name: str
    task: str
    queue: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    timing: Timing = field(kw_only=True)
    """When it fires. Declared here, between kwargs and misfire, because its fields are
    stored in this place of the definition's map (see :meth:`encode`)."""
    misfire: str = "skip"
    misfire_grace_ms: int = int(DEFAULT_MISFIRE_GRACE * 1000)
    paused: bool = False
    finished: bool = False
    last_ms: int | None = None
    created_ms: int = 0
    tries: int | None = None
    timeout: float | None = None
    backoff: Backoff = ()
    declared: bool = False
    """Declared with ``@task(cron=...)``; workers keep it in line with the code."""
    max_exceptions: int | None = None
    fail_on_timeout: bool = False
    keep_ms: int = 0
    """How long each run keeps its result (``keep_result``), in ms; 0: not kept."""
    middleware: tuple[Any, ...] = ()
    """``using(middleware=)``'s, each as a payload carries it (``[class, fields]``)."""
    tags: tuple[str, ...] = ()
    """Each run's tags (``@task(tags=...)``, a callable's for the schedule's arguments)."""
    iterable: bool = False
    """Its task is iterable (``@task(iterable=True)``): each run carries the mark."""
    priority: int | None = None
    """Each run's priority level (``@task(priority=)``), carried in its meta; None: 5."""
    concurrency: int | None = None
    """Its task's ``concurrency=``: at most that many runs at once, each run's too."""
    group: str | None = None
    """Each run's fair group (``@task(group=)``, a callable's for the schedule's
    arguments), carried in its meta."""
    retry_within: float | None = None
    """``retry_until`` as seconds from each run's dispatch (a timedelta or seconds:
    a moment or a callable would be the same for every run)."""
    encrypted: bool = False
    """Its task is encrypted (``@task(encrypted=True)``): its arguments are stored
    sealed (in :attr:`sealed`), and so is each run's payload."""
    sealed: bytes | None = None
    """An encrypted schedule's arguments as stored: ``[args, kwargs]`` sealed for its
    queue and name (rqueue/encoding/sealing.py); ``args`` and ``kwargs`` are stored
    empty."""
    next_ms: int | None = None
    """Read from the timeline (not stored in the definition): None if paused or finished."""
    trusted: bool = True
    """Not stored: False if this process has a secret and the definition is not signed
    with it (written without it, or altered in Redis); workers will not fire it."""
    unreadable: str | None = None
    """Not stored: why the stored definition does not read (garbage, a field of the
    wrong type or out of range), for a listing to show it as such; None if it reads.
    Such a record has its name and queue only, and never fires."""
    hidden: bool = False
    """Not stored: its arguments are sealed and this process has no key to open them;
    ``args`` and ``kwargs`` are then empty, a listing says ``encrypted`` and a worker
    does not fire it."""

    # The timing's fields, read where they always were (``schedule.cron``).

    @property
    def cron(self) -> str | None:
        return self.timing.cron

    @property
    def every_ms(self) -> int | None:
        return self.timing.every_ms

    @property
    def timezone(self) -> str:
        return self.timing.timezone

    @property
    def start_ms(self) -> int | None:
        return self.timing.start_ms

    @property
    def end_ms(self) -> int | None:
        return self.timing.end_ms

    @property
    def anchor_ms(self) -> int:
        return self.timing.anchor_ms

    @property
    def next_run(self) -> datetime | None:
        return None if self.next_ms is None else from_ms(self.next_ms)

    @property
    def last_run(self) -> datetime | None:
        return None if self.last_ms is None else from_ms(self.last_ms)

    @classmethod
    def unreadable_record(cls, name: str, queue: str, reason: str) -> Schedule:
        """What a listing shows of a definition that does not read."""
        return cls(name=name, task="", queue=queue, timing=Timing(check=False), unreadable=reason)

    @property
    def state(self) -> str:
        """What ``rqueue schedule list`` and the dashboard show: unreadable, refused,
        finished, paused, shelved or active (see :meth:`standing` for overdue)."""
        if self.unreadable is not None:
            return f"unreadable ({self.unreadable})"
        if not self.trusted:
            return "refused (not signed with RQUEUE_SECRET)"
        if self.finished or self.paused:
            return "finished" if self.finished else "paused"
        if self.next_ms is None:  # a worker took it off the timeline: it cannot fire
            return "shelved (cannot fire: see the worker's log; update or resume it)"
        return "active"

    def standing(self, now_ms: int, served: Collection[str]) -> str:
        """:attr:`state`, and for an active schedule whether it is overdue (its next run
        past by more than its misfire grace, or :data:`OVERDUE_AFTER_MS`) or on a queue
        no worker serves (``served``: the queues running workers take), which would
        otherwise read "active" for ever with a next run in the past."""
        state = self.state
        if state != "active":
            return state
        assert self.next_ms is not None  # active: on the timeline
        overdue = now_ms - self.next_ms > max(self.misfire_grace_ms, OVERDUE_AFTER_MS)
        if self.queue not in served:
            where = f"no worker serves queue {self.queue}"
            return f"overdue: {where}" if overdue else f"active ({where})"
        if overdue:
            return "overdue: its workers do not fire it (down, busy, or --no-schedule)"
        return state

    @property
    def removal_note(self) -> str:
        """What removing it does not do, when it was declared with ``@task(cron=...)``
        (or ``every=``): every worker that imports the task declares it again at its
        start, so a removal alone would come back, silently. Empty if not declared."""
        if not self.declared:
            return ""
        return (
            f"it is declared in code (@task(cron=...) or every= on {self.task}), so the "
            "next worker that imports it declares it again: remove the cron= (or every=) "
            "from the task to stop it"
        )

    def next_runs(self, count: int) -> list[datetime]:
        """The next ``count`` fire times (UTC datetimes) from the next scheduled one;
        InvalidSchedule if its timing does not check, or walks past the year 9999."""
        if self.finished or self.unreadable is not None or count <= 0:
            return []
        timing = self.timing.checked()
        try:
            first = self.next_ms
            if first is None:
                first = timing.next_after(self.created_ms)
            if first is None:
                return []
            return [from_ms(first)] + [from_ms(t) for t in timing.next_runs(first, count - 1)]
        except (ValueError, OverflowError, OSError) as exc:
            reason = f"schedule {self.name!r}: no next run a date holds ({exc})"
            raise InvalidSchedule(reason) from None

    def describe(self) -> str:
        if self.unreadable is not None:
            return "-"
        if self.cron:
            return f"cron {self.cron!r} ({self.timezone})"
        return f"every {(self.every_ms or 0) / 1000:g} s"

    def job(self, trigger_ms: int, now_ms: int, job_id: str | None = None) -> Job:
        """The call this schedule makes for one trigger: what ``dispatch()`` through
        the task (with its ``using()``) would make, but for a unique lock."""
        meta: dict[str, Any] = {
            "schedule": self.name,
            "trigger": iso(trigger_ms),
            "trigger_ms": trigger_ms,
        }
        if self.keep_ms:
            meta[KEEP] = self.keep_ms
        if self.middleware:
            meta[MIDDLEWARE] = list(self.middleware)
        if self.iterable:
            meta[ITERABLE] = 1
        if self.priority is not None:
            meta[PRIORITY] = self.priority
        if self.concurrency is not None:
            meta[CONCURRENCY] = self.concurrency
        if self.group is not None:
            meta[GROUP] = self.group
        dispatched_at = now_ms / 1000
        return Job(
            id=job_id or new_id(),
            task=self.task,
            args=self.args,
            kwargs=dict(self.kwargs),
            queue=self.queue,
            tries=self.tries,
            timeout=self.timeout,
            backoff=self.backoff,
            dispatched_at=dispatched_at,
            meta=meta,
            max_exceptions=self.max_exceptions,
            retry_until=None if self.retry_within is None else dispatched_at + self.retry_within,
            fail_on_timeout=self.fail_on_timeout,
            tags=self.tags,
            encrypted=self.encrypted,
        )

    def encode(self, keyring: Keyring | None = None) -> bytes:
        """Its definition; an encrypted schedule's arguments sealed with ``keyring``
        (kept as they were read if this process could not open them)."""
        if not self.encrypted:
            return self._packed({"sealed": None})  # arguments sealed before stay behind
        if self.hidden:
            if self.args or self.kwargs:
                raise EncryptionUnavailable(
                    f"schedule {self.name!r} is encrypted: new arguments need the key "
                    f"({KEYS_SETTING})"
                )
            return self._packed({})
        if keyring is None:
            raise no_key_to_seal(self.task)
        plain = self._msgpack([list(self.args), self.kwargs])
        sealed = keyring.seal(plain, schedule_data(self.queue, self.name))
        return self._packed({"sealed": sealed, "args": [], "kwargs": {}})

    def fired(self, last_ms: int | None, finished: bool) -> bytes:
        """The definition after a firing: this one with its last run and finished flag.
        Encoded without a copy of the record, which cost a scheduler firing thousands
        at one instant a fifth of its time (an encrypted one's arguments as read)."""
        changes: dict[str, Any] = {"last_ms": last_ms, "finished": finished}
        if self.encrypted:
            changes.update(args=[], kwargs={})
        return self._packed(changes)

    def _packed(self, changes: dict[str, Any]) -> bytes:
        stored: dict[str, Any] = {}
        for name in _STORED:
            if name == "timing":
                stored.update((f, getattr(self.timing, f)) for f in _TIMING_FIELDS)
            else:
                stored[name] = getattr(self, name)
        stored["args"] = list(self.args)
        stored["backoff"] = list(self.backoff)
        stored["middleware"] = list(self.middleware)
        stored["tags"] = list(self.tags)
        stored.update(changes)
        return self._msgpack(stored)

    def _msgpack(self, value: Any) -> bytes:
        """``value`` packed with msgpack's own types, or InvalidSchedule saying why not."""
        try:
            return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]
        except (TypeError, ValueError, OverflowError) as exc:
            # Definitions are read by every process that lists or fires them, which may
            # not have registered a type: so they hold msgpack's own types only.
            raise InvalidSchedule(
                f"schedule {self.name!r}: its arguments must be msgpack's own types (None, "
                "bool, numbers, str, bytes, lists, maps, aware datetimes); Decimal, UUID, "
                f"dates and registered types are not supported in schedules: {exc}"
            ) from None

    @classmethod
    def decode(
        cls,
        data: bytes,
        next_ms: int | None = None,
        trusted: bool = True,
        keyring: Keyring | None = None,
    ) -> Schedule:
        """Read a stored definition. Its timing is checked when used, not here, so a
        schedule this version would refuse still lists, pauses and is removed. Bytes that
        are not a definition at all (they come from Redis) raise InvalidSchedule, and so
        do sealed arguments ``keyring`` does not open; without a keyring they stay
        ``hidden``."""
        try:
            stored = msgpack.unpackb(data, raw=False, strict_map_key=False)
            check_fields(stored)
            known = {k: v for k, v in stored.items() if k in _KNOWN}
            known["args"] = tuple(known.get("args") or ())
            known["backoff"] = tuple(known.get("backoff") or ())
            known["middleware"] = tuple(known.get("middleware") or ())
            known["tags"] = checked_tags(known.get("tags") or ())
            given = {k: v for k, v in stored.items() if k in _TIMING}
            timing = Timing(**given, check=False)
            # Sealed arguments count only on an encrypted schedule: a plain one's
            # arguments are those stored in clear.
            sealed = bool(known.get("encrypted")) and known.get("sealed") is not None
            hidden = sealed and keyring is None
            if sealed and keyring is not None:
                known["args"], known["kwargs"] = _opened(known, keyring)
            schedule = cls(**known, timing=timing, next_ms=next_ms, trusted=trusted)
            return replace(schedule, hidden=True) if hidden else schedule
        except Exception as exc:
            kind, message = describe(exc)
            raise InvalidSchedule(
                f"a stored schedule definition is unreadable ({kind}: {message})"
            ) from None


def _opened(known: dict[str, Any], keyring: Keyring) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments sealed in a definition's ``sealed`` field, checked."""
    plain = keyring.open(known["sealed"], schedule_data(known["queue"], known["name"]), "arguments")
    args, kwargs = msgpack.unpackb(plain, raw=False, strict_map_key=False)
    check_fields({"args": args, "kwargs": kwargs})
    return tuple(args), kwargs


_STORED = tuple(
    f.name for f in fields(Schedule) if f.name not in ("next_ms", "trusted", "unreadable", "hidden")
)
"""The definition's map, in its stored order: the timing's fields take its place."""
_TIMING_FIELDS = tuple(f.name for f in fields(Timing))
_KNOWN = frozenset(_STORED) - {"timing"}
"""The stored fields a definition's map is read into, as a set: a scheduler decodes
every definition it fires, and a lookup in the tuples above cost a third of that."""
_TIMING = frozenset(_TIMING_FIELDS)
