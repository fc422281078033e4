"""Releasing a unique task's lock (``@task(unique=)``) as the task starts or finishes.

push.lua takes the lock in the call that queues the task; from then on only the
task's own id releases it (release_unique.lua), whichever attempt or process does so:
a retry keeps it, and a task whose lock expired and was taken by a newer dispatch
leaves that one's lock alone. A lock that cannot be released (its key is not a hash)
is logged, never raised: the task's outcome stands, and the lock expires by itself.

:class:`UniqueLock` is the feature's part in an attempt (``attempt.Participant``);
only a unique task's attempts have it (``participants.py``).
"""

from __future__ import annotations

import logging

import redis

from rqueue.encoding.payload import Job
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import Persist
from rqueue.tasks.options import UNIQUE
from rqueue.worker.attempt import Participant

log = logging.getLogger("rqueue.worker")


def is_unique(job: Job) -> bool:
    """Whether the call is a unique task's (its lock is ours to release)."""
    return job.meta.get(UNIQUE) is not None


class UniqueLock(Participant):
    """Releases a unique task's lock when ``unique_until`` says (see the functions below)."""

    __slots__ = ("persist", "store")

    def __init__(self, store: RedisQueue, persist: Persist) -> None:
        self.store = store
        self.persist = persist

    def before_call(self, queue: str, job: Job) -> None:
        on_start(self.store, self.persist, queue, job)

    def after_succeeded(self, queue: str, job: Job, duration: float) -> None:
        on_finish(self.store, self.persist, queue, job)

    def after_failed(self, queue: str, job: Job | None, duration: float | None) -> None:
        if job is not None:
            on_failed(self.store, self.persist, queue, job)


def on_start(store: RedisQueue, persist: Persist, queue: str, job: Job) -> None:
    """The task is about to run: ``unique_until="processing"`` releases its lock now."""
    if _until(job) == "processing":
        _release(store, persist, queue, job)


def on_finish(store: RedisQueue, persist: Persist, queue: str, job: Job) -> None:
    """The task succeeded: its lock goes, unless it went when the task started."""
    until = _until(job)
    if until is not None and until != "processing":
        _release(store, persist, queue, job)


def on_failed(store: RedisQueue, persist: Persist, queue: str, job: Job) -> None:
    """The task failed for good (or could not run at all, so perhaps never started):
    its lock goes whatever ``unique_until`` says."""
    if _until(job) is not None:
        _release(store, persist, queue, job)


def _until(job: Job) -> object:
    """The call's ``unique_until``, or None if it is not a unique task's call. Anything
    else in its meta (Redis's data: any value) counts as the default, "processed"."""
    entry = job.meta.get(UNIQUE)
    if entry is None:
        return None
    return entry.get("until", "processed") if isinstance(entry, dict) else "processed"


def _release(store: RedisQueue, persist: Persist, queue: str, job: Job) -> None:
    try:
        persist(lambda: store.release_unique(queue, job.id))
    except redis.ResponseError as exc:
        log.error("task %s (%s): its unique lock cannot be released: %s", job.task, job.id, exc)
