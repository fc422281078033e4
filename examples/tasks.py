"""Example tasks, run by ``rqueue demo``: one of each outcome a queue has to handle.

Workers import this module by name (``tasks``), so run them from this folder::

    cd examples && rqueue work emails,default -A tasks

The listeners at the bottom count outcomes in Redis so the demo can show progress;
they are ordinary app-wide listeners, the place for metrics in a real app.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis

from rqueue import Job, TaskEvent, TaskTimeout, on_exception, on_failed, on_processed, task
from rqueue.store.default import default_queue

log = logging.getLogger("rqueue.examples")

STATS = "demo:stats"
"""A hash of outcome counts (completed, retried, failed, timed_out), under the key prefix."""


def connection() -> tuple[redis.Redis, str]:
    """This process's Redis client and key prefix (a worker child's own connection)."""
    queue = default_queue()
    return queue.client, queue.config.prefix


# -- the tasks ----------------------------------------------------------------------


@task
def greet(n: int) -> str:
    """A quick task: most real tasks look like this."""
    return f"hello #{n}"


@task(queue="emails")
def send_reminder(user_id: int) -> None:
    """Dispatched with ``later()``: it waits in ``queues:emails:delayed`` until due."""
    log.debug("reminder sent to user %d", user_id)


def receipt_sent(result: str, job: Job) -> None:
    """``after_succeeded`` hook: gets the task's return value and the job."""
    log.debug("%s on attempt %d", result, job.attempts)


@task(queue="emails", tries=3, backoff=[0.5, 1], after_succeeded=receipt_sent)
def flaky_charge(order_id: int) -> str:
    """Fails on its first two attempts (a flaky payment API), succeeds on the third."""
    client, prefix = connection()
    attempt = client.incr(f"{prefix}demo:charge-attempts:{order_id}")
    if attempt < 3:
        raise ConnectionError(f"payment API timed out (attempt {attempt})")
    return f"order {order_id} charged"


def alert(exception: BaseException, job: Job) -> None:
    """``after_failed`` hook: gets the final exception and the job, once, at the end."""
    log.warning("ALERT: %s gave up after %d attempts: %s", job.task, job.attempts, exception)


@task(tries=2, backoff=0.5, after_failed=alert)
def always_fails(order_id: int) -> None:
    """Raises every time: retried once after 0.5 s, then moved to the failed list."""
    raise ValueError(f"card declined for order {order_id}")


@task(timeout=1, tries=1)
def slow_report() -> None:
    """Overruns its one-second timeout: the worker raises TaskTimeout inside it."""
    time.sleep(30)


# -- listeners: count outcomes for the demo's progress line -----------------------------


def _count(field: str) -> None:
    client, prefix = connection()
    client.hincrby(f"{prefix}{STATS}", field, 1)


@on_processed
def _completed(event: TaskEvent) -> None:
    _count("completed")


@on_exception
def _retried(event: TaskEvent) -> None:
    if event.will_retry:
        _count("retried")


@on_failed
def _failed(event: TaskEvent) -> None:
    _count("failed")
    if isinstance(event.exception, TaskTimeout):
        _count("timed_out")


def stats(client: Any, prefix: str) -> dict[str, int]:
    """The counts so far, every field present."""
    raw = client.hgetall(f"{prefix}{STATS}")
    counts = {k.decode(): int(v) for k, v in raw.items()}
    return {f: counts.get(f, 0) for f in ("completed", "retried", "failed", "timed_out")}
