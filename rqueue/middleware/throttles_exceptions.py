"""``ThrottlesExceptions``: a circuit breaker over a task's exceptions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rqueue.encoding.payload import Job
from rqueue.encoding.ranges import MAX_TRIES
from rqueue.middleware.base import (
    Middleware,
    Release,
    RetryIn,
    check_by,
    check_seconds,
    given_key,
    key_of,
    running_on,
    task_key,
)
from rqueue.store.guards import BREAKER_STATES, breaker
from rqueue.store.queue import RedisQueue


@dataclass(frozen=True)
class ThrottlesExceptions(Middleware):
    """Stop running a task while it keeps failing (say, a third-party API that is down).

    Closed: runs go ahead and their exceptions are counted. ``max_exceptions`` of them
    within ``decay`` seconds open the breaker for ``decay`` seconds: calls are put back
    without running and without using an attempt. Then it is half-open: one call runs
    as a trial; its success closes the breaker, its exception opens it again. Any
    success while closed starts the count afresh. A call that raised is retried as
    usual (its attempt used), after ``backoff`` seconds if given, else after the task's
    own backoff. ``by``: one breaker per key (default: per task).
    """

    max_exceptions: int = 10
    decay: float = 600.0
    backoff: float | None = None
    by: str | int | Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if type(self.max_exceptions) is not int or not 1 <= self.max_exceptions <= MAX_TRIES:
            raise ValueError(
                f"ThrottlesExceptions(max_exceptions) must be an int from 1 to {MAX_TRIES:,}, "
                f"got {self.max_exceptions!r}"
            )
        check_seconds(self.decay, "ThrottlesExceptions(decay)", 0.001)
        if self.backoff is not None:
            check_seconds(self.backoff, "ThrottlesExceptions(backoff)")
        check_by(self.by)

    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        runner = running_on("ThrottlesExceptions")
        key = key_of(self.by, job, task_key(job.task))
        token = f"{job.id}:{job.attempts}"
        trial = (job.timeout or runner.timeout) + runner.kill_grace
        report = (runner.connection, job.queue, key)
        wait = breaker(*report, "check", token, self.max_exceptions, self.decay, trial)
        if wait:
            raise Release(wait)
        try:
            result = call_next()
        except Exception as exc:
            if isinstance(exc, (Release, RetryIn)):
                raise
            breaker(*report, "failure", token, self.max_exceptions, self.decay, trial)
            if self.backoff is not None:
                raise RetryIn(self.backoff) from exc
            raise
        breaker(*report, "success", token, self.max_exceptions, self.decay, trial)
        return result

    def state(self, connection: RedisQueue, queue: str, key: str) -> str:
        """closed, open or half-open: the breaker of ``key`` on ``queue``: a task's
        name, or with ``by`` a key it gives (the two never share a breaker)."""
        stored = task_key(key) if self.by is None else given_key(key)
        return BREAKER_STATES[int(breaker(connection, queue, stored, "state"))]
