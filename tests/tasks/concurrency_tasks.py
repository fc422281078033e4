"""Tasks limited by ``concurrency=N`` / ``Concurrency``: each records its start and end
in Redis, in the order Redis saw them, so a test can count the runs that overlapped."""

from __future__ import annotations

import asyncio
import os
import signal
import time

from rqueue import current_job, task
from rqueue.middleware import Concurrency
from rqueue.store.default import default_queue

EVENTS = "test:conc:events"
"""``start <value> <attempt>`` and ``end <value>``, in the order they happened."""
LIMIT = 3


def note(text: str) -> None:
    default_queue().client.rpush(EVENTS, text)


def attempt() -> int:
    job = current_job()
    assert job is not None
    return job.attempts


@task(concurrency=LIMIT, tries=1, timeout=300)
def limited(value: str, seconds: float) -> None:
    note(f"start {value} {attempt()}")
    time.sleep(seconds)
    note(f"end {value}")


@task(concurrency=LIMIT, tries=1, timeout=300)
async def limited_async(value: str, seconds: float) -> None:
    note(f"start {value} {attempt()}")
    await asyncio.sleep(seconds)
    note(f"end {value}")


@task
def unlimited(value: str, seconds: float) -> None:
    """Limited only where a call is given ``using(concurrency=N)``."""
    note(f"start {value} {attempt()}")
    time.sleep(seconds)
    note(f"end {value}")


@task(middleware=[Concurrency("dies", limit=2, expire_after=2.0)], tries=3)
def limited_dies(value: str, seconds: float) -> None:
    """SIGKILLs its own child mid-run on its first attempt if ``value`` starts with
    ``kill``: its slot is left held until it expires."""
    note(f"start {value} {attempt()}")
    if value.startswith("kill") and attempt() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(seconds)
    note(f"end {value}")
