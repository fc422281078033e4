"""Iterable tasks for tests/unit/worker/test_iterable.py and the chaos test; workers
import this module from tests/tasks/.

Each item ``i`` is recorded in the hash :data:`SEEN` (``HINCRBY i 1``), so a test
counts exactly which items ran and how often; each attempt records where it started
(:data:`STARTS`: ``"<cursor> <attempt>"``). The cursor is the next item's index."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

from rqueue import Total, current_job, task
from rqueue.store.default import default_queue

SEEN = "test:iter:seen"
STARTS = "test:iter:starts"
STALL = "test:iter:stall"
"""Set: the item given in it stalls (first attempt only) for the seconds given."""


def _started(cursor: int | None) -> int:
    job = current_job()
    attempt = job.attempts if job is not None else 0
    default_queue().client.rpush(STARTS, f"{cursor} {attempt}")
    return cursor or 0


def _stall(i: int) -> None:
    """Sleep at the item the test asked to stall at, on the first attempt only."""
    client = default_queue().client
    raw = client.hget(STALL, str(i))
    job = current_job()
    if raw is not None and job is not None and job.attempts == 1:
        time.sleep(float(raw))  # type: ignore[arg-type]


@task(tries=3, iterable=True, keep_result=60)
def walk(items: int, pace: float = 0.0, cursor: int | None = None) -> Iterator[object]:
    """Visit ``items`` items, ``pace`` seconds each, saying how many there are."""
    client = default_queue().client
    yield Total(items)
    for i in range(_started(cursor), items):
        _stall(i)
        client.hincrby(SEEN, str(i), 1)
        time.sleep(pace)
        yield i + 1
    return f"walked {items}"


@task(tries=1, iterable=True, timeout=2, keep_result=60)
def walk_once(items: int, pace: float = 0.0, cursor: int | None = None) -> Iterator[object]:
    """As ``walk``, with one try: a warm shutdown must not use it."""
    client = default_queue().client
    for i in range(_started(cursor), items):
        client.hincrby(SEEN, str(i), 1)
        time.sleep(pace)
        yield i + 1
    return f"walked {items}"


@task(tries=3, iterable=True, keep_result=60)
async def async_walk(
    items: int, pace: float = 0.0, cursor: int | None = None
) -> AsyncIterator[object]:
    client = default_queue().client
    yield Total(items)
    for i in range(_started(cursor), items):
        stall = client.hget(STALL, str(i))
        job = current_job()
        if stall is not None and job is not None and job.attempts == 1:
            await asyncio.sleep(float(stall))  # type: ignore[arg-type]
        client.hincrby(SEEN, str(i), 1)
        await asyncio.sleep(pace)
        yield i + 1


@task(tries=2, iterable=True)
def bad_cursor(cursor: object = None) -> Iterator[object]:
    """Yields a cursor msgpack cannot carry: failed at once, not retried."""
    yield object()
    time.sleep(1.5)  # a checkpoint is due
    yield object()


@task(tries=50, iterable=True, timeout=5)
def chunks(items: int, chunk: int, pace: float, cursor: int | None = None) -> Iterator[object]:
    """The chaos test's task: items in chunks, each chunk recorded in one pipeline
    before its cursor is yielded (a cursor never covers an unrecorded item), in a hash
    of its own (:data:`SEEN` + ``:<task id>``)."""
    client = default_queue().client
    job = current_job()
    seen = f"{SEEN}:{job.id if job is not None else 'inline'}"
    yield Total(items)
    start = _started(cursor)
    for first in range(start, items, chunk):
        last = min(items, first + chunk)
        pipe = client.pipeline(transaction=False)
        for i in range(first, last):
            pipe.hincrby(seen, str(i), 1)
        pipe.execute()
        time.sleep(pace)
        yield last


@task(keep_result=60)
def calls_walk(items: int) -> object:
    """A plain task calling an iterable task's function directly: it runs to its end
    and keeps nothing in this task's name."""
    return walk(items)
