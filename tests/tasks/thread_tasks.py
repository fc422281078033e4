"""Sync tasks for tests/unit/worker/test_thread_mode.py (``rqueue work --threads N``); workers
import this module from tests/tasks/. Each records what it saw in Redis lists the tests read."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time

from rqueue import current_job, task
from rqueue.middleware import WithoutOverlapping
from rqueue.store.default import default_queue
from rqueue.tasks import awaiting

ARRIVED = "test:threads:arrived"
"""A counter of ``gather`` runs that have started."""
STARTED = "test:threads:started"
"""A counter of ``slow`` runs that have started."""
DONE = "test:threads:done"
"""``n attempt pid thread`` of each run that finished."""
SEEN = "test:threads:seen"
"""``job-id n`` as a task saw them before and after it waited."""
LOCKED = "test:threads:locked"
"""``enter n`` / ``leave n`` around the locked part of a locked task."""
AWAITED = "test:threads:awaited"
"""How many of its child's asyncio tasks awaited an attempt, as each ``awaited`` saw it."""
RELEASE = "test:threads:release"
"""Tokens that let ``held`` runs end, one each."""
CPUS = "test:threads:cpus"
"""``pid cpu,cpu,...`` of each ``cpus`` run: the CPUs its thread may run on."""


def note(key: str, text: str) -> None:
    default_queue().client.rpush(key, text)


def finished(n: int | str) -> None:
    job = current_job()
    assert job is not None
    note(DONE, f"{n} {job.attempts} {os.getpid()} {threading.get_ident()}")


@task(timeout=20, tries=1)
def gather(n: int, expected: int) -> None:
    """Returns only once ``expected`` runs have started: one at a time, the first
    would wait for ever (and time out)."""
    client = default_queue().client
    client.incr(ARRIVED)
    give_up = time.monotonic() + 20  # a thread cannot be interrupted: bound it here
    while int(client.get(ARRIVED) or 0) < expected:
        if time.monotonic() > give_up:
            raise TimeoutError(f"only {client.get(ARRIVED)} of {expected} arrived")
        time.sleep(0.01)
    finished(n)


@task(timeout=1, tries=1)
def overrun(seconds: float) -> None:
    """Overruns its 1 s timeout in a thread, which nothing can stop."""
    time.sleep(seconds)
    finished("overrun")


@task(timeout=30, tries=3, backoff=0)
def slow(n: int, seconds: float) -> None:
    default_queue().client.incr(STARTED)
    time.sleep(seconds)
    finished(n)


@task(timeout=30, tries=1)
def held(n: int) -> None:
    """Runs until the test pushes a token to ``RELEASE`` (at most 20 s)."""
    client = default_queue().client
    client.incr(STARTED)
    if client.blpop([RELEASE], 20) is None:
        raise TimeoutError("never released")
    finished(n)


@task
def cpus() -> None:
    allowed = ",".join(map(str, sorted(os.sched_getaffinity(0))))  # this thread's own
    note(CPUS, f"{os.getpid()} {allowed}")


@task
def whoami(n: int, pause: float) -> None:
    for _ in range(2):
        job = current_job()
        assert job is not None
        note(SEEN, f"{job.id} {n}")
        time.sleep(pause)


@task(middleware=[WithoutOverlapping("thread-report", release_after=0.05)])
def locked(n: int) -> None:
    note(LOCKED, f"enter {n}")
    time.sleep(0.05)
    note(LOCKED, f"leave {n}")


@task
def awaited() -> None:
    """Notes how many asyncio tasks on its child's loop run an attempt (counted there)."""
    loop, counted = awaiting.process_loop(), concurrent.futures.Future[int]()

    def count() -> None:
        attempts = [t for t in asyncio.all_tasks(loop) if "_attempt" in repr(t.get_coro())]
        counted.set_result(len(attempts))

    loop.call_soon_threadsafe(count)
    note(AWAITED, str(counted.result(timeout=10)))
