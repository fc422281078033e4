"""Tasks for the job-control tests (tests/unit/tasks/test_job_controls.py); workers import this
module from tests/tasks/. Each records its attempts in Redis, keyed by the value
it is given, so a test can count them and wait for them."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from apptasks import swallow_timeouts

from rqueue import task
from rqueue.store.default import default_queue

DONE = "test:controls:done"


def attempt(value: str) -> int:
    """Record one attempt (with its time) and return how many there have been."""
    client = default_queue().client
    client.rpush(f"test:controls:times:{value}", repr(time.time()))
    return int(client.incr(f"test:controls:attempts:{value}"))


@task(tries=10, max_exceptions=2)
def raises(value: str) -> None:
    attempt(value)
    raise ValueError(f"raising on purpose: {value}")


@task(tries=5, max_exceptions=2, timeout=1)
def times_out_first(value: str) -> None:
    """Times out on its first attempt, then raises: the timeout must not count."""
    if attempt(value) == 1:
        time.sleep(30)
    raise ValueError(f"raising on purpose: {value}")


@task(tries=5, max_exceptions=3)
def raises_once(value: str) -> str:
    if attempt(value) == 1:
        raise ValueError("first attempt fails")
    default_queue().client.rpush(DONE, value)
    return value


@task(tries=3)
def fails(value: str) -> None:
    """Plain: retried as its tries say (tests add retry_until with ``using``)."""
    attempt(value)
    raise ValueError(f"raising on purpose: {value}")


@task
def record(value: str) -> None:
    attempt(value)
    default_queue().client.rpush(DONE, value)


def _soon() -> datetime:
    return datetime.now(timezone.utc) + timedelta(seconds=0.2)


@task(retry_until=_soon)
def record_if_in_time(value: str) -> None:
    attempt(value)
    default_queue().client.rpush(DONE, value)


@task(timeout=1, tries=3, fail_on_timeout=True)
def sleeps(value: str) -> None:
    attempt(value)
    time.sleep(30)


@task(timeout=1, tries=3, fail_on_timeout=True)
def swallows_timeout(value: str) -> None:
    """Swallows its TaskTimeout: the parent kills the child, and fails it at once."""
    attempt(value)
    swallow_timeouts(30)


@task(tries=4, backoff=("exponential", 0.3, 0.6))
def backs_off(value: str) -> None:
    attempt(value)
    raise ValueError(f"raising on purpose: {value}")
