"""``async def`` tasks for tests/unit/worker/test_async_tasks.py (async mode); workers import this
module from tests/tasks/. Each records what it saw in Redis lists the tests read."""

from __future__ import annotations

import asyncio
import os
import threading
import time

from rqueue import current_job, task
from rqueue.middleware import RateLimited, WithoutOverlapping
from rqueue.store.default import default_queue

STARTS = "test:async:starts"
"""``n pid start-time`` of each run."""
DONE = "test:async:done"
"""``n attempt`` of each run that finished."""
SEEN = "test:async:seen"
"""``job-id n`` as a task saw them before and after it awaited."""
LOCKED = "test:async:locked"
"""``enter n`` / ``leave n`` around the awaited part of a locked task."""
IN_FLIGHT = "test:async:in-flight"
"""How many ``counted`` runs are in flight now (a counter)."""
MOST_IN_FLIGHT = "test:async:most-in-flight"
"""Each ``counted`` run's count of runs in flight, itself included, as it started."""
HELD = "test:async:held"
"""A counter of ``held`` runs that have started."""
RELEASE = "test:async:release"
"""Tokens that let ``held`` runs end, one each."""


def note(key: str, text: str) -> None:
    default_queue().client.rpush(key, text)


def attempt() -> int:
    job = current_job()
    assert job is not None
    return job.attempts


@task
async def nap(n: int, seconds: float = 0.5) -> int:
    note(STARTS, f"{n} {os.getpid()} {time.time()}")
    await asyncio.sleep(seconds)
    note(DONE, f"{n} {attempt()}")
    return n


@task
async def counted(n: int, seconds: float = 0.1) -> None:
    """Says how many runs of it were in flight as it started (every child's)."""
    client = default_queue().client
    note(MOST_IN_FLIGHT, str(client.incr(IN_FLIGHT)))
    await asyncio.sleep(seconds)
    client.decr(IN_FLIGHT)
    note(DONE, f"{n} {attempt()}")


@task(timeout=30, tries=1)
async def held(n: int) -> None:
    """Runs until the test pushes a token to ``RELEASE`` (at most 20 s), looking for one
    every 10 ms (each look a quick call: the loop is not held up)."""
    client = default_queue().client
    client.incr(HELD)
    give_up = time.monotonic() + 20
    while client.lpop(RELEASE) is None:
        if time.monotonic() > give_up:
            raise TimeoutError("never released")
        await asyncio.sleep(0.01)
    note(DONE, f"{n} {attempt()}")


_arrived: dict[int, int] = {}
_all_here: dict[int, asyncio.Event] = {}


@task(timeout=60, tries=1)
async def gather(n: int, expected: int) -> None:
    """Finishes only once ``expected`` runs are in flight in this child at once: run one
    at a time, the first would wait for ever (and time out)."""
    note(STARTS, f"{n} {os.getpid()} {time.time()}")
    _arrived[expected] = _arrived.get(expected, 0) + 1
    here = _all_here.setdefault(expected, asyncio.Event())
    if _arrived[expected] >= expected:
        here.set()
    await here.wait()
    note(DONE, f"{n} {attempt()}")


@task(timeout=1, tries=1)
async def short_fuse(n: int, seconds: float) -> None:
    """Times out (1 s) if ``seconds`` is longer: only that coroutine is cancelled."""
    await asyncio.sleep(seconds)
    note(DONE, f"{n} {attempt()}")


@task(timeout=30, tries=3, backoff=0)
async def patient(n: int) -> None:
    """A sibling of ``blocker``: running (awaiting) when the loop is blocked."""
    note(STARTS, f"{n} {os.getpid()} {time.time()}")
    await asyncio.sleep(3)
    note(DONE, f"{n} {attempt()}")


@task(timeout=1, tries=1)
async def blocker() -> None:
    """Blocks the loop with sync code: no asyncio timeout can cancel it."""
    note(STARTS, f"blocker {os.getpid()} {time.time()}")
    time.sleep(60)


@task
async def whoami(n: int, pause: float) -> None:
    job = current_job()
    assert job is not None
    note(SEEN, f"{job.id} {n}")
    await asyncio.sleep(pause)
    job = current_job()
    assert job is not None
    note(SEEN, f"{job.id} {n}")


@task(tries=3, backoff=0)
async def flaky(n: int) -> None:
    """Fails its first attempt, succeeds on its second."""
    await asyncio.sleep(0.01)
    if attempt() < 2:
        raise ValueError(f"first attempt of {n}")
    note(DONE, f"{n} {attempt()}")


@task(middleware=[WithoutOverlapping("async-report", release_after=0.05)])
async def locked(n: int) -> None:
    note(LOCKED, f"enter {n}")
    await asyncio.sleep(0.05)
    note(LOCKED, f"leave {n}")


@task(middleware=[RateLimited("async-rate", 10, 1.0)])
async def rate_limited(n: int) -> None:
    await asyncio.sleep(0.01)
    note(DONE, f"{n} {attempt()}")


THREADS = "test:async:threads"
"""The names of the threads of the child that ran ``threads_seen``, comma-separated."""


@task
def threads_seen() -> None:
    """Report the threads of this child (test_wake_path.py: none waits for pushes)."""
    note(THREADS, ",".join(sorted(thread.name for thread in threading.enumerate())))
