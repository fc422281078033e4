"""Tasks the tests dispatch; the workers import this module from tests/tasks/.

Each task records what happened in Redis (never in memory: it runs in a worker
child), so a test can assert on it and wait for it.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from rqueue import Job, dispatch_many, task
from rqueue.errors import TaskTimeout
from rqueue.store.default import default_queue

DONE = "test:done"
HOOKS = "test:hooks"


def redis():  # type: ignore[no-untyped-def]
    return default_queue().client


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


def swallow_timeouts(seconds: float) -> None:
    """Sleep ``seconds``, swallowing every TaskTimeout: only the parent's kill stops it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            time.sleep(seconds)
        except TaskTimeout:
            continue


def _swallow_timeouts_for_a_minute() -> None:
    redis().rpush("test:started", os.getpid())
    swallow_timeouts(60)


@task(timeout=1, tries=1)
def swallows_timeout() -> None:
    _swallow_timeouts_for_a_minute()


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


# -- added for the core test suite (issue 2) --------------------------------------

ATTEMPT_TIMES = "test:attempt_times"


@task(tries=3, backoff=[0.3, 0.6])
def fails_with_backoff(value: str) -> None:
    """Records when each attempt ran, so a test can check the backoff between them."""
    redis().rpush(ATTEMPT_TIMES, repr(time.time()))
    raise ValueError(f"failing on purpose: {value}")


@task
def always_raises(value: str) -> None:
    """No tries of its own: the worker's ``--tries`` applies."""
    redis().rpush(DONE, f"attempt:{value}")
    raise RuntimeError(f"raising on purpose: {value}")


@task(tries=1)
def naps(seconds: float) -> None:
    """No timeout of its own: the worker's ``--timeout`` applies."""
    redis().rpush("test:started", os.getpid())
    time.sleep(seconds)
    redis().rpush(DONE, "napped")


@task
def record_pid(value: Any) -> None:
    redis().rpush(DONE, f"{value}:{os.getpid()}")


# -- added for schedules and cancel (issue 5) ---------------------------------------

TRIGGERS = "test:triggers"
"""Hash of ``schedule@trigger_ms`` -> how many times that trigger ran."""
LATENESS = "test:lateness"
"""List of ``enqueue_lateness_ms:start_lateness_ms`` per run, by Redis's clock."""


def _record_trigger(result: Any, job: Job) -> None:
    client = redis()
    sec, micro = client.time()
    now_ms = int(sec) * 1000 + int(micro) // 1000
    trigger_ms = int(job.meta["trigger_ms"])
    pipe = client.pipeline(transaction=False)
    pipe.hincrby(TRIGGERS, f"{job.meta['schedule']}@{trigger_ms}", 1)
    pipe.rpush(f"test:runs:{job.meta['schedule']}", f"{trigger_ms}:{result}")
    pipe.rpush(LATENESS, f"{job.dispatched_at * 1000 - trigger_ms:.0f}:{now_ms - trigger_ms}")
    pipe.execute()


@task(after_succeeded=_record_trigger)
def scheduled(label: str) -> str:
    """Fired by schedules in the tests; its hook records which trigger ran."""
    return label


@task(queue="declared", cron="*/2 * * * * *", timezone="Europe/Berlin")
def declared_every_two_seconds() -> None:
    """Declared with a cron on its own queue: a worker serving ``declared`` with
    ``-A apptasks`` creates its schedule (other tests' workers never see it)."""
    redis().rpush("test:declared", "ran")


@task
def report_clock() -> None:
    """Records this worker's idea of the time, to prove a skewed clock really is skewed."""
    redis().rpush("test:clock", repr(time.time()))


# -- added for the reliability tests (issue 3) ------------------------------------


@task
def noop(value: Any = None) -> Any:
    """Touches no Redis key of its own (for an ACL user limited to rqueue's keys)."""
    return value


_leak: list[bytes] = []


@task
def leaks(kilobytes: int) -> None:
    """Keeps ``kilobytes`` more memory alive in this process on every call, and records its pid."""
    _leak.append(b"\x01" * (kilobytes * 1024))  # written, so resident
    redis().rpush("test:leak_pids", os.getpid())


@task(tries=2)
def reports_current_job(fail_first: bool) -> None:
    from rqueue import current_job

    job = current_job()
    assert job is not None
    redis().rpush(DONE, f"{job.id}:{job.attempts}")
    if fail_first and job.attempts == 1:
        raise RuntimeError("first attempt fails")


@task(timeout=1, tries=1, after_failed=_log_failure)
def swallows_timeout_with_hook() -> None:
    _swallow_timeouts_for_a_minute()


@task(tries=1, after_failed=_log_failure)
def dies_with_hook() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def dispatch_first_then_blocking(blocking: str, then: int) -> None:
    """In one push: ``record("first")``, ``blocks_until_released(blocking)``, then
    ``record(0..then-1)``.

    A child's first batch after an idle spell is one task and its second up to four
    (worker/child.py), so while the blocking task runs, the child holds it and the next
    three; with a deep enough queue it has also reserved the batch after that.
    """
    dispatch_many(
        [record.pending("first")]
        + [blocks_until_released.pending(blocking)]
        + [record.pending(i) for i in range(then)]
    )


# -- added for the poison-task hardening (issue 10) ---------------------------------


class Unprintable(Exception):
    """An exception whose ``__str__`` raises: reporting it must not fail."""

    def __str__(self) -> str:
        raise RuntimeError("no str() for this one")


@task(tries=1)
def raises_unprintable() -> None:
    raise Unprintable("the real error")


@task(tries=1)
def raises_undecodable_text() -> None:
    """A message with a lone surrogate, which UTF-8 (and so msgpack) cannot encode."""
    raise ValueError("bad byte \udcff in a file name")


@task(tries=1)
def exits(message: str) -> None:
    """``sys.exit`` inside a task: a failed attempt, not a dead worker child."""
    raise SystemExit(message)


def _exiting_hook(result: Any) -> None:
    raise SystemExit("a hook that exits")


@task(after_succeeded=_exiting_hook)
def with_exiting_hook(value: str) -> str:
    redis().rpush(DONE, value)
    return value


# -- added for Cluster and Sentinel (issue 11) ------------------------------------


@task(tries=1)
def dispatches_record(value: Any) -> None:
    """Dispatch ``record(value)`` from inside a task: the worker's own settings (such
    as ``--wait-replicas``) apply to it."""
    record.dispatch(value)
