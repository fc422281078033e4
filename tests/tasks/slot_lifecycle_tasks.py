"""Tasks for tests/unit/worker/test_slot_lifecycle.py (async mode through a worker's life: shutdown,
limits, pause, signing); workers import this module from tests/tasks/. Each run
records ``n pid attempt`` in Redis lists the tests read."""

from __future__ import annotations

import asyncio
import os

from rqueue import current_job, task
from rqueue.store.default import default_queue

STARTS = "test:slots:starts"
"""``n pid attempt`` as each run starts."""
DONE = "test:slots:done"
"""``n pid attempt`` as each run finishes."""
RELEASE = "test:slots:release"
"""Set by a test to let every ``held`` coroutine finish."""

_hoard: list[bytes] = []


def note(key: str, n: object) -> None:
    job = current_job()
    assert job is not None
    default_queue().client.rpush(key, f"{n} {os.getpid()} {job.attempts}")


@task(tries=3)
async def held(n: object) -> None:
    """Awaits until the test sets ``RELEASE``: in flight for as long as a test needs."""
    note(STARTS, n)
    client = default_queue().client
    while not client.exists(RELEASE):
        await asyncio.sleep(0.02)
    note(DONE, n)


@task(tries=3)
async def nap(n: object, seconds: float = 0.2) -> None:
    note(STARTS, n)
    await asyncio.sleep(seconds)
    note(DONE, n)


@task(tries=3)
def plain(n: object) -> None:
    """A sync task, run in process mode even by a child whose loop has coroutines."""
    note(STARTS, n)
    note(DONE, n)


@task(tries=3)
async def hoard(n: object, kilobytes: int, seconds: float) -> None:
    """Keeps ``kilobytes`` more memory alive in this process, then awaits ``seconds``."""
    _hoard.append(os.urandom(kilobytes * 1024))
    note(STARTS, n)
    await asyncio.sleep(seconds)
    note(DONE, n)
