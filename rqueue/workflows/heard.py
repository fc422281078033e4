"""What a worker child last heard of its batches' cancellation.

A member must not run once its batch was cancelled, but asking Redis before each
member would cost a round trip per task. Each count of members (batch_member.lua)
answers whether their batch was cancelled, and that answer is remembered here for a
moment, with the worker child (``Runner.batches_heard``), shared by its runs.
"""

from __future__ import annotations

import time

from rqueue.encoding.payload import Job
from rqueue.store.batch_store import BatchStore
from rqueue.store.queue import RedisQueue
from rqueue.tasks.current import current_runner
from rqueue.workflows.batches import BATCH

_FRESH = 0.5
"""Seconds a child goes by what it last heard of a batch's cancellation (see
:func:`batch_cancelled`): a member starting that soon after a cancel may still run."""
_REMEMBERED = 1000


def heard_cancelled(job: Job) -> bool | None:
    """Whether the job's batch was cancelled, as this child last heard; None if it has
    heard nothing fresh, and :func:`batch_cancelled` must ask Redis.

    What the last count of members of the same batch said (batch_member.lua answers
    it) is taken as is for ``_FRESH`` seconds: a child running a batch's members one
    after another then reads it about once per reserve call, with their counts.
    A cancellation is for good, so a cancelled batch is never read again. What was
    heard is kept with the worker child (``Runner.batches_heard``), shared by its runs.
    """
    heard = _heard()
    known = None if heard is None else heard.get(job.meta[BATCH])
    if known is not None and (known[0] or time.monotonic() - known[1] < _FRESH):
        return known[0]
    return None


def batch_cancelled(job: Job, queue: RedisQueue) -> bool:
    """True if the job is a member of a batch that was cancelled: skip it. Read from
    Redis, and remembered; ask :func:`heard_cancelled` first."""
    batch_id = job.meta[BATCH]
    cancelled = BatchStore(queue).cancelled(batch_id) is True
    remember(batch_id, cancelled)
    return cancelled


def _heard() -> dict[str, tuple[bool, float]] | None:
    runner = current_runner()
    return None if runner is None else runner.batches_heard


def remember(batch_id: str, cancelled: bool) -> None:
    heard = _heard()
    if heard is None:
        return
    if len(heard) >= _REMEMBERED:
        heard.clear()
    heard[batch_id] = (cancelled, time.monotonic())
