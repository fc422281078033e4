"""Tasks of tests/unit/tasks/test_fail_without_retry.py, each twice, as ``def``
(process mode, ``--threads``, ``sync()``) and as ``async def`` (``--slots``), the same
bodies. Each records its attempts in Redis by the value it is given, and its
``after_failed`` hook what it heard, so a test counts a task's attempts in any mode."""

from __future__ import annotations

from typing import Any

from rqueue import Batch, Fail, TaskFailed, current_job, task
from rqueue.store.default import default_queue

ATTEMPTS = "test:failfast:attempts"
"""A hash: value -> attempts made."""
HEARD = "test:failfast:heard"
"""What the hooks and the catch and finally steps heard, in order."""

_RAISED: dict[str, type[Exception]] = {
    "os": OSError,
    "missing": FileNotFoundError,
    "value": ValueError,
    "runtime": RuntimeError,
}


def _attempt(value: str) -> None:
    default_queue().client.hincrby(ATTEMPTS, value, 1)


def _heard(exc: BaseException, job: Any) -> None:
    default_queue().client.rpush(HEARD, f"after_failed:{job.args[0]}:{type(exc).__name__}")


def _fail(value: str) -> None:
    _attempt(value)
    try:
        int(value)
    except ValueError as exc:
        raise Fail(f"gave up on {value}") from exc


def _fail_by_job(value: str) -> None:
    _attempt(value)
    job = current_job()
    assert job is not None
    job.fail(f"{value} is closed")


def _raise(value: str, kind: str) -> None:
    _attempt(value)
    raise _RAISED[kind](f"{kind} on purpose")


@task(tries=5, backoff=0, after_failed=_heard)
def fails(value: str) -> None:
    _fail(value)


@task(tries=5, backoff=0, after_failed=_heard)
async def fails_async(value: str) -> None:
    _fail(value)


@task(tries=5, backoff=0)
def fails_by_job(value: str) -> None:
    _fail_by_job(value)


@task(tries=5, backoff=0)
async def fails_by_job_async(value: str) -> None:
    _fail_by_job(value)


@task(tries=3, backoff=0, retry_for=(OSError,), dont_retry_for=(FileNotFoundError,))
def picky(value: str, kind: str) -> None:
    """Retries an OSError, but a FileNotFoundError (an OSError) or anything else fails
    at once."""
    _raise(value, kind)


@task(tries=3, backoff=0, retry_for=(OSError,), dont_retry_for=(FileNotFoundError,))
async def picky_async(value: str, kind: str) -> None:
    _raise(value, kind)


@task(tries=3, backoff=0, dont_retry_for=ValueError, after_failed=_heard)
def refuses(value: str, kind: str) -> None:
    """A ValueError fails at once; anything else is retried, as by default."""
    _raise(value, kind)


@task(tries=3, backoff=0, dont_retry_for=ValueError, after_failed=_heard)
async def refuses_async(value: str, kind: str) -> None:
    _raise(value, kind)


@task
def record(value: str) -> str:
    _attempt(value)
    return value


@task
def caught(failure: TaskFailed, label: str) -> None:
    default_queue().client.rpush(HEARD, f"caught:{label}:{failure.exception}:{failure.message}")


@task
def finished(found: Batch, label: str) -> None:
    status = found.status()
    assert status is not None
    counts = f"{status.total}:{status.succeeded}:{status.failed}"
    default_queue().client.rpush(HEARD, f"finally:{label}:{counts}")


SYNC = {"fails": fails, "fails_by_job": fails_by_job, "picky": picky, "refuses": refuses}
ASYNC: dict[str, Any] = {
    "fails": fails_async,
    "fails_by_job": fails_by_job_async,
    "picky": picky_async,
    "refuses": refuses_async,
}
