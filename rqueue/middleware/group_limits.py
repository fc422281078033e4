"""The limits a worker puts on each fair group (``rqueue work --group-concurrency 5
--group-rate 10/s``): built-in middleware keyed by the call's group.

Groups take turns in the reserve script (lua/groups.lua); a limit per group is a
``Concurrency`` and a ``RateLimited`` whose key is the group's name, shared by every
task of the queue, so a waiting call waits as theirs do: parked without using an
attempt, woken when a slot frees or its turn at the rate comes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rqueue.encoding.ranges import checked_group
from rqueue.middleware.base import Middleware
from rqueue.middleware.concurrency import Concurrency
from rqueue.middleware.rate_limited import RateLimited

_CACHED_GROUPS = 4096
"""Groups whose middleware a child keeps built: a busy group's calls reuse them."""


@dataclass(frozen=True)
class GroupLimits:
    """At most ``concurrency`` running, and at most ``rate`` (tasks, per seconds)
    starting, for each group; None: no such limit."""

    concurrency: int | None = None
    rate: tuple[int, float] | None = None

    def __post_init__(self) -> None:  # built once per worker: a bad value fails at start
        self.of_group("checked")

    def of_group(self, group: object) -> tuple[Middleware, ...]:
        """The middleware a call of ``group`` runs through first (none for a name a
        dispatch would refuse: the payload's, from Redis, is not trusted)."""
        try:
            name = checked_group(group)
        except ValueError:
            return ()
        return _limits(self, name)


@lru_cache(maxsize=_CACHED_GROUPS)
def _limits(limits: GroupLimits, group: str) -> tuple[Middleware, ...]:
    built: list[Middleware] = []
    if limits.concurrency is not None:
        built.append(Concurrency(f"group:{group}", limits.concurrency, shared=True))
    if limits.rate is not None:
        tasks, per = limits.rate
        built.append(RateLimited("group", tasks, per, by=group))
    return tuple(built)
