"""Tasks that report progress, for tests/unit/events/; workers import this module from
tests/tasks/. Each reports a quarter, then waits (bounded) until the test lets it go,
so the test reads the progress of a task still running."""

from __future__ import annotations

import asyncio

from rqueue import current_job, task
from rqueue.store.default import default_queue

GO = "test:progress:go"
"""A token per task allowed to finish."""


def report(fraction: float, message: str | None) -> None:
    job = current_job()
    assert job is not None
    job.progress(fraction, message)


@task(keep_result=60, tries=1)
def steps(message: str) -> str:
    report(0.25, message)
    default_queue().client.blpop([GO], 10)
    report(0.5, None)
    return "done"


@task(keep_result=60, tries=1)
async def async_steps(message: str) -> str:
    report(0.25, message)
    for _ in range(1000):  # bounded: 10 s
        if default_queue().client.lpop(GO) is not None:
            break
        await asyncio.sleep(0.01)
    report(0.5, None)
    return "done"


@task(keep_result=60, tries=2)
def flaky() -> None:
    """Reports progress, then fails each attempt: retried once, then failed."""
    report(0.1, "trying")
    raise ValueError("always")


@task(keep_result=60)
def quick(fraction: float) -> None:
    report(fraction, None)


@task(keep_result=60, tags=lambda order: [f"order:{order}", "shipping"])
def tagged(order: str) -> None:
    report(1, "shipped")


@task(keep_result=60)
def bad_fraction(fraction: object) -> str:
    """Reports a fraction that is not one: the InvalidProgress's text is its result."""
    try:
        report(fraction, None)  # type: ignore[arg-type]
    except ValueError as exc:
        return str(exc)
    return "accepted"


@task(tries=1, tags=lambda message: [f"note:{message}"])
def unkept_steps(message: str) -> None:
    """As ``steps``, keeping no result: ``rqueue status`` finds it where it is."""
    report(0.25, message)
    default_queue().client.blpop([GO], 10)
    raise ValueError(message)
