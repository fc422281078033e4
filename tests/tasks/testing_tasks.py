"""Tasks for tests/unit/testing/test_testing.py (fake and sync modes, the pytest plugin)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rqueue import Batch, TaskFailed, current_job, task
from rqueue.encoding.payload import Job
from rqueue.errors import BatchCancelled
from rqueue.middleware import Middleware
from rqueue.middleware.base import Release, RetryIn

seen: list[Any] = []
"""What the tasks below were called with, in order (inline runs only)."""


@task
def add(a: int, b: int) -> int:
    seen.append(("add", a, b))
    return a + b


@task(queue="emails")
def send(to: str) -> str:
    seen.append(("send", to))
    return f"sent to {to}"


@task
def double(n: int) -> int:
    seen.append(("double", n))
    return n * 2


@task
def fan_out(n: int) -> None:
    """Dispatches while it runs: ``run_all`` runs those too."""
    for i in range(n):
        send.dispatch(f"user{i}")


@task(tries=3)
def flaky(fail_times: int) -> int:
    job = current_job()
    assert job is not None
    if job.attempts <= fail_times:
        raise ValueError(f"attempt {job.attempts} failed")
    return job.attempts


@task(tries=1)
def boom(message: str) -> None:
    raise RuntimeError(message)


@task
def alert(failure: TaskFailed, channel: str) -> None:
    seen.append(("alert", failure.exception, failure.message, channel))


@task
def on_batch(batch: Batch, what: str) -> None:
    status = batch.status()
    assert status is not None
    seen.append((what, status.succeeded, status.failed, status.total))


class Tagging(Middleware):
    """Wraps a run: records it ran, and what the task returned."""

    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        seen.append(("before", job.task))
        result = call_next()
        seen.append(("after", result))
        return result


class AlwaysRelease(Middleware):
    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        raise Release(30)


@task(middleware=[Tagging()])
def wrapped(n: int) -> int:
    return n + 1


@task(middleware=[AlwaysRelease()])
def limited() -> None:
    seen.append(("limited ran",))


@dataclass
class Point:
    x: int
    y: int


@task
async def fetch(n: int) -> int:
    """An ``async def`` task: run inline, it is awaited as a worker would await it."""
    await asyncio.sleep(0)
    job = current_job()
    assert job is not None
    seen.append(("fetch", n, job.task))
    return n * 10


@task(tries=1)
async def fails_async() -> None:
    await asyncio.sleep(0)
    raise ValueError("async boom")


@task(tries=2)
def releases_itself() -> None:
    seen.append(("releases itself",))
    raise Release(1)


class AsksForARetry(Middleware):
    """Turns the task's ValueError into a retry in 5 s (as ThrottlesExceptions does)."""

    def __call__(self, job: Job, call_next: Callable[[], Any]) -> Any:
        try:
            return call_next()
        except ValueError as exc:
            raise RetryIn(5) from exc


@task(tries=2, middleware=[AsksForARetry()])
def retried_by_its_middleware() -> None:
    seen.append(("retried by its middleware",))
    raise ValueError("still broken")


@task(tries=2)
def not_a_member_but_cancelled() -> None:
    seen.append(("not a member",))
    raise BatchCancelled("raised by a task outside any batch")
