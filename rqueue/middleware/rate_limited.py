"""``RateLimited``: at most ``limit`` runs per ``per`` seconds, per key."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from rqueue.encoding.payload import Job
from rqueue.middleware.base import (
    Middleware,
    Release,
    check_by,
    check_name,
    check_seconds,
    key_of,
    running_on,
)
from rqueue.store.guards import take_cell

MAX_LIMIT = 1_000_000


@dataclass(frozen=True)
class RateLimited(Middleware):
    """At most ``limit`` runs start per ``per`` seconds for each key (``by``: a str,
    or a function of the call's arguments; None: one limiter for all calls).

    The algorithm is GCRA with no burst: runs start at least ``per / limit`` seconds
    apart, so no window of ``per`` seconds holds more than ``limit`` (rate_limit.lua).
    A call that may not start yet is given its own later slot and put back in the
    delayed set until then, **without using an attempt** (Laravel's RateLimited uses
    one). ``dont_release()`` drops such a call instead (it counts as done). The
    limiter is the queue's: the same name on two queues is two limiters. ``per`` is
    seconds or a timedelta.
    """

    name: str
    limit: int
    per: float | timedelta
    by: str | int | Callable[..., Any] | None = None
    release: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.per, timedelta):  # frozen: set as dataclasses do it themselves
            object.__setattr__(self, "per", self.per.total_seconds())
        check_name(self.name, "RateLimited(name)")
        if type(self.limit) is not int or not 1 <= self.limit <= MAX_LIMIT:
            raise ValueError(
                f"RateLimited(limit) must be an int from 1 to {MAX_LIMIT:,}, got {self.limit!r}"
            )
        check_seconds(self.per, "RateLimited(per)", 0.001)
        check_by(self.by)
        if type(self.release) is not bool:
            raise ValueError(f"RateLimited(release) must be True or False, got {self.release!r}")

    def dont_release(self) -> RateLimited:
        """The same limit, dropping a call that may not start now instead of delaying it."""
        return dataclasses.replace(self, release=False)

    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        connection = running_on("RateLimited").connection
        # The name's length first: "api" keyed "x:y" and "api:x" keyed "y" are two limiters.
        key = f"{len(self.name)}:{self.name}:{key_of(self.by, job, 'all')}"
        wait = take_cell(connection, job.queue, key, job.id, self.limit, float(self.per))  # type: ignore[arg-type]
        if not wait:
            return call_next()
        if self.release:
            raise Release(wait)
        return None
