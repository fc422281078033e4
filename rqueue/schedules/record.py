"""One schedule as stored in Redis: its definition, timing and the call it makes.

A plain record; reading and writing it in Redis is :mod:`rqueue.schedules.api`, firing
it is :mod:`rqueue.schedules.scheduler`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgpack

from rqueue.payload import Job, new_id
from rqueue.timing import Timing, from_ms, iso

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
    cron: str | None = None
    every_ms: int | None = None
    timezone: str = "UTC"
    start_ms: int | None = None
    end_ms: int | None = None
    anchor_ms: int = 0
    misfire: str = "skip"
    misfire_grace_ms: int = int(DEFAULT_MISFIRE_GRACE * 1000)
    paused: bool = False
    finished: bool = False
    last_ms: int | None = None
    created_ms: int = 0
    tries: int | None = None
    timeout: float | None = None
    backoff: tuple[float, ...] = ()
    declared: bool = False
    """Declared with ``@task(cron=...)``; workers keep it in line with the code."""
    next_ms: int | None = None
    """Read from the timeline (not stored in the definition): None if paused or finished."""

    @property
    def timing(self) -> Timing:
        return Timing(
            self.cron, self.every_ms, self.timezone, self.start_ms, self.end_ms, self.anchor_ms
        )

    @property
    def next_run(self) -> datetime | None:
        return None if self.next_ms is None else from_ms(self.next_ms)

    @property
    def last_run(self) -> datetime | None:
        return None if self.last_ms is None else from_ms(self.last_ms)

    def next_runs(self, count: int) -> list[datetime]:
        """The next ``count`` fire times (UTC datetimes) from the next scheduled one."""
        if self.finished or count <= 0:
            return []
        first = self.next_ms
        if first is None:
            first = self.timing.next_after(self.created_ms)
        if first is None:
            return []
        return [from_ms(first)] + [from_ms(t) for t in self.timing.next_runs(first, count - 1)]

    def describe(self) -> str:
        if self.cron:
            return f"cron {self.cron!r} ({self.timezone})"
        return f"every {(self.every_ms or 0) / 1000:g} s"

    def job(self, trigger_ms: int, now_ms: int, job_id: str | None = None) -> Job:
        """The call this schedule makes for one trigger."""
        return Job(
            id=job_id or new_id(),
            task=self.task,
            args=self.args,
            kwargs=dict(self.kwargs),
            queue=self.queue,
            tries=self.tries,
            timeout=self.timeout,
            backoff=self.backoff,
            dispatched_at=now_ms / 1000,
            meta={"schedule": self.name, "trigger": iso(trigger_ms), "trigger_ms": trigger_ms},
        )

    def encode(self) -> bytes:
        fields = {k: v for k, v in vars(self).items() if k != "next_ms"}
        fields["args"] = list(self.args)
        fields["backoff"] = list(self.backoff)
        return msgpack.packb(fields, use_bin_type=True)  # type: ignore[no-any-return]

    @classmethod
    def decode(cls, data: bytes, next_ms: int | None = None) -> Schedule:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=False)
        known = {k: v for k, v in fields.items() if k in cls.__dataclass_fields__}
        known["args"] = tuple(known.get("args") or ())
        known["backoff"] = tuple(known.get("backoff") or ())
        return cls(**known, next_ms=next_ms)
