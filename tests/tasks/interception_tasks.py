"""Tasks for tests/unit/testing/test_interception_modes.py: one run opens a ``fake()`` while
another, beside it in the same child (``--threads``, ``--slots``), dispatches."""

from __future__ import annotations

import asyncio
import time

from rqueue import task
from rqueue.store.default import default_queue
from rqueue.testing import fake

OPEN, DISPATCHED, RECORDED = "test:fake-open", "test:dispatched", "test:recorded"


def _flag(key: str) -> bool:
    return bool(default_queue().client.exists(key))


@task(queue="marks")
def mark() -> None:
    pass


@task
def faking() -> None:
    """Opens a fake, and keeps it open until the other run dispatched."""
    with fake() as recorded:
        default_queue().client.set(OPEN, 1)
        deadline = time.monotonic() + 20
        while not _flag(DISPATCHED) and time.monotonic() < deadline:
            time.sleep(0.02)
    default_queue().client.set(RECORDED, len(recorded.calls))


@task
def dispatching() -> None:
    deadline = time.monotonic() + 20
    while not _flag(OPEN) and time.monotonic() < deadline:
        time.sleep(0.02)
    mark.dispatch()
    default_queue().client.set(DISPATCHED, 1)


@task
async def faking_async() -> None:
    with fake() as recorded:
        default_queue().client.set(OPEN, 1)
        deadline = time.monotonic() + 20
        while not _flag(DISPATCHED) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    default_queue().client.set(RECORDED, len(recorded.calls))


@task
async def dispatching_async() -> None:
    deadline = time.monotonic() + 20
    while not _flag(OPEN) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    mark.dispatch()
    default_queue().client.set(DISPATCHED, 1)
