"""``Concurrency``: at most N runs at once per key, a call that may not start parked
until a slot frees.

A ``WithoutOverlapping`` lock turns a call away with a short release, so a thousand
calls for one lock knock once a second each. Here a call that finds every slot taken
is parked in the same script that found them taken (slot_take.lua): moved from the
reserved set to the delayed set, its attempt given back, and put in the key's line;
the run that frees a slot makes the first in line ready at once (slot_free.lua). A
parked call is also due by itself when the earliest slot expires, so a holder killed
with SIGKILL delays the line by at most a slot's lifetime, never for good.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rqueue.encoding.payload import Job
from rqueue.middleware.base import (
    Middleware,
    Parked,
    Release,
    check_lock,
    holder_of,
    lock_key,
    running_on,
)
from rqueue.store.guards import Slot, free_slot, take_slot
from rqueue.tasks.current import current_run

MAX_LIMIT = 1_000_000
RETRY_CAP = 1.0
"""Seconds a call that could not be parked (run inline, under ``sync()``) waits at
most before it asks again."""
PARKED = 1
"""slot_take.lua's reply for a call it parked (moved out of the reserved set)."""
OPTION_KEY = "concurrency"
"""The key of ``@task(concurrency=N)``: a task's own slots (``task:<name>:concurrency``)."""


def check_limit(limit: object, what: str) -> int:
    """``limit`` if it is an int from 1 to MAX_LIMIT, else ValueError naming ``what``."""
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"{what} must be an int from 1 to {MAX_LIMIT:,}, got {limit!r}")
    return limit


@dataclass(frozen=True)
class Concurrency(Middleware):
    """At most ``limit`` runs with one ``key`` (per task; across tasks with
    ``shared=True``) run at once, across every worker of the queue.

    Each run holds a slot by its task id and attempt: only that run frees it, when it
    finishes, however it finishes. A slot expires after ``expire_after`` seconds, by
    default the task's timeout plus the worker's kill grace, as a
    ``WithoutOverlapping`` lock does. A call that finds every slot taken waits,
    **without using an attempt**, parked until a run frees a slot (or, if its holder
    died, until the earliest slot expires); ``limit=1`` is a ``WithoutOverlapping``
    whose waiting calls are woken instead of knocking every second.
    """

    key: str
    limit: int = 1
    expire_after: float | None = None
    shared: bool = False

    def __post_init__(self) -> None:
        check_lock("Concurrency", self.key, self.expire_after, shared=self.shared)
        check_limit(self.limit, "Concurrency(limit)")

    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        runner = running_on("Concurrency")
        key = lock_key(self.key, self.shared, job)
        token, lasting = holder_of(job, runner, self.expire_after)
        run = current_run()
        payload = b"" if run is None else run.reserved_payload()
        slot = Slot(self.limit, lasting)
        parked, wait = take_slot(runner.connection, job.queue, key, token, slot, payload)
        if parked == PARKED:
            raise Parked(wait)  # moved already: the worker sends nothing more
        if parked:
            raise Release(min(wait, RETRY_CAP))
        try:
            return call_next()
        finally:
            free_slot(runner.connection, job.queue, key, token)
