"""Tasks the tests dispatch; the workers import this module from the tests folder.

Each task records what happened in Redis (never in memory: it runs in a worker
child), so a test can assert on it and wait for it.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from rqueue import Job, registry, task
from rqueue.errors import TaskTimeout

DONE = "test:done"
HOOKS = "test:hooks"


def redis():  # type: ignore[no-untyped-def]
    return registry.default_queue().client


@task
def record(value: Any) -> Any:
    redis().rpush(DONE, str(value))
    return value


@task(queue="emails", tries=3, backoff=[0.2, 0.4])
def always_fails(value: Any) -> None:
    redis().rpush(DONE, f"attempt:{value}")
    raise ValueError(f"failing on purpose: {value}")


@task(tries=3)
def fails_until(value: str, succeed_on: int) -> str:
    count = redis().incr(f"test:attempts:{value}")
    if count < succeed_on:
        raise RuntimeError(f"attempt {count} fails")
    redis().rpush(DONE, value)
    return value


@task(timeout=1, tries=1)
def sleeps(seconds: float) -> None:
    redis().rpush("test:started", os.getpid())
    time.sleep(seconds)
    redis().rpush(DONE, "slept")


@task(timeout=1, tries=1)
def swallows_timeout() -> None:
    redis().rpush("test:started", os.getpid())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            time.sleep(60)
        except TaskTimeout:
            continue


@task(tries=3)
def blocks_until_released(value: str) -> None:
    """Announces its pid, then waits (bounded) until the test lets it finish."""
    client = redis()
    client.rpush("test:started", f"{os.getpid()}:{value}")
    client.blpop(["test:release"], timeout=30)
    client.rpush(DONE, value)


@task(tries=2)
def kills_own_process() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _log_success(result: Any, job: Job) -> None:
    redis().rpush(HOOKS, f"succeeded:{result}:{job.id}")


def _log_failure(exc: BaseException, job: Job) -> None:
    redis().rpush(HOOKS, f"failed:{type(exc).__name__}:{job.attempts}")


def _broken_hook(result: Any) -> None:
    raise RuntimeError("hook is broken")


@task(after_succeeded=_log_success, after_failed=_log_failure, tries=2)
def with_hooks(value: str, fail: bool = False) -> str:
    if fail:
        raise KeyError(value)
    return value


@task(after_succeeded=_broken_hook)
def with_broken_hook(value: str) -> str:
    redis().rpush(DONE, value)
    return value
