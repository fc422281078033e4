"""``WithoutOverlapping``: one run at a time per key, under a lock that always expires."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rqueue.encoding.payload import Job
from rqueue.middleware.base import (
    Middleware,
    Release,
    check_lock,
    check_seconds,
    holder_of,
    lock_key,
    running_on,
)
from rqueue.store.guards import lock, unlock

RETRY_CAP = 1.0
"""Seconds a locked-out call waits at most before it tries again, by default."""


@dataclass(frozen=True)
class WithoutOverlapping(Middleware):
    """Runs with one ``key`` (per task; across tasks with ``shared=True``) never overlap.

    The lock belongs to the run that took it (its task id and attempt): only that run
    frees it, when it finishes, however it finishes. It expires after
    ``expire_after`` seconds, by default the task's timeout plus the worker's kill
    grace, so a worker killed mid-run (SIGKILL, a lost host) never leaves it stuck:
    Laravel's default lock never expires. A call that finds the key locked is put
    back, without using an attempt, for ``release_after`` seconds (0: until the lock
    may be free, at most a second); ``dont_release()`` drops it instead.
    """

    key: str
    release_after: float = 0.0
    expire_after: float | None = None
    shared: bool = False
    release: bool = True

    def __post_init__(self) -> None:
        check_lock(
            "WithoutOverlapping",
            self.key,
            self.expire_after,
            shared=self.shared,
            release=self.release,
        )
        check_seconds(self.release_after, "WithoutOverlapping(release_after)")

    def dont_release(self) -> WithoutOverlapping:
        """The same lock, dropping a call that finds it taken instead of delaying it."""
        return dataclasses.replace(self, release=False)

    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        runner = running_on("WithoutOverlapping")
        key = lock_key(self.key, self.shared, job)
        token, lasting = holder_of(job, runner, self.expire_after)
        held = lock(runner.connection, job.queue, key, token, lasting)
        if held:
            if not self.release:
                return None
            raise Release(self.release_after or min(held, RETRY_CAP))
        try:
            return call_next()
        finally:
            unlock(runner.connection, job.queue, key, token)
