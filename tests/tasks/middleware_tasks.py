"""Tasks for tests/unit/middleware/test_middleware.py; workers import this module
from tests/tasks/. Each records what it saw in Redis lists the tests read."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rqueue import current_job, task
from rqueue.encoding.payload import Job
from rqueue.middleware import (
    Middleware,
    RateLimited,
    Skip,
    ThrottlesExceptions,
    WithoutOverlapping,
)
from rqueue.store.default import default_queue

STARTS = "test:mw:starts"
"""``value attempts start-time`` of each run of the rate-limited task."""
RUNS = "test:mw:runs"
ORDER = "test:mw:order"
DOWN = "test:mw:down"


def note(key: str, text: str) -> None:
    default_queue().client.rpush(key, text)


@dataclass(frozen=True)
class Recording(Middleware):
    """Notes entering and leaving the run, by label: shows the order of a stack."""

    label: str

    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        note(ORDER, f"enter {self.label}")
        try:
            return call_next()
        finally:
            note(ORDER, f"leave {self.label}")

    def before_dispatch(self, job: Job) -> None:
        job.meta.setdefault("labels", []).append(self.label)


@task(middleware=[RateLimited("starts", 50, 1.0)])
def limited(value: str) -> None:
    job = current_job()
    assert job is not None
    note(STARTS, f"{value} {job.attempts} {time.time()!r}")


@task(middleware=[RateLimited("once-a-minute", 1, 60).dont_release()])
def limited_dropping(value: str) -> None:
    note(RUNS, value)


@task(middleware=[RateLimited("per-user", 1, 60, by=lambda user, value: user)])
def limited_per_user(user: str, value: str) -> None:
    note(RUNS, f"{user}:{value}")


@task(middleware=[WithoutOverlapping("report")])
def exclusive(value: str, seconds: float) -> None:
    job = current_job()
    assert job is not None
    note(RUNS, f"start {value} {job.attempts}")
    time.sleep(seconds)
    note(RUNS, f"end {value}")


@task(middleware=[WithoutOverlapping("dies", expire_after=2.0)], tries=3)
def exclusive_dies_first(value: str) -> None:
    """SIGKILLs its own child on its first attempt, holding the lock."""
    job = current_job()
    assert job is not None
    note(RUNS, f"{value} {job.attempts}")
    if job.attempts == 1:
        os.kill(os.getpid(), signal.SIGKILL)


@task(middleware=[ThrottlesExceptions(max_exceptions=2, decay=1.5, backoff=0.1)], tries=50)
def flaky(value: str) -> str:
    job = current_job()
    assert job is not None
    note(RUNS, f"{value} {job.attempts}")
    if default_queue().client.exists(DOWN):
        raise ConnectionError("the service is down")
    return value


def _is_skipped(value: str) -> bool:
    return value.startswith("skip")


@task(middleware=[Skip(when=_is_skipped)])
def skippable(value: str) -> None:
    note(RUNS, value)


@task(middleware=[Recording("declared")])
def recorded(value: str) -> list[str]:
    job = current_job()
    assert job is not None
    note(ORDER, f"run {value}")
    labels = job.meta.get("labels", [])
    return list(labels)


@task(middleware=[ThrottlesExceptions(max_exceptions=1, decay=60)])
def guarded(value: str) -> None:
    """Its breaker is its own: ``impostor``'s ``by=`` names it, and must not open it."""
    note(RUNS, f"guarded {value}")


@task(middleware=[ThrottlesExceptions(max_exceptions=1, decay=60, by=guarded.name)], tries=1)
def impostor(value: str) -> None:
    """Fails, opening the breaker of the key its ``by=`` gives: ``guarded``'s name."""
    raise RuntimeError(f"the service is down ({value})")
