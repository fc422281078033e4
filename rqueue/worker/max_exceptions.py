"""Exception counting (``@task(max_exceptions=)``): fail a task after so many exceptions.

A task may have many tries (a rate limit's releases use none) yet fail for good once
its own code raised ``max_exceptions`` times, as Laravel's ``$maxExceptions``. The
count lives in Redis (count_exception.lua), by task id, so every attempt adds to the
same count whichever child runs it. A timeout is not counted, nor the last failure
(no retry is left to refuse). A task that finished for good leaves no count behind.

:class:`ExceptionCount` is the feature's part in an attempt (``attempt.Participant``);
only the attempts of a task with ``max_exceptions`` have it (``participants.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis

from rqueue.encoding.payload import Job
from rqueue.errors import TaskTimeout
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import Persist
from rqueue.worker.attempt import Participant

log = logging.getLogger("rqueue.worker")

_COUNT_SLACK = 7 * 24 * 3600
"""Seconds a count of exceptions outlives the backoff before the task's next attempt:
a task that waits longer than a week in its queue starts counting afresh."""


class ExceptionCount(Participant):
    """Counts a task's exceptions and refuses its retry at ``max_exceptions``.

    ``count`` adds one exception and returns the count so far (given the retry's
    delay, which the count must outlive); ``forget`` drops the count. A worker keeps
    them in Redis (:meth:`in_redis`); the inline runner of ``rqueue.testing`` in
    memory, by the same rule."""

    __slots__ = ("count", "forget")

    def __init__(
        self, count: Callable[[str, Job, float], int], forget: Callable[[str, Job], None]
    ) -> None:
        self.count = count
        self.forget = forget

    @classmethod
    def in_redis(cls, store: RedisQueue, persist: Persist) -> ExceptionCount:
        def count(queue: str, job: Job, delay: float) -> int:
            return _count_in_redis(store, persist, queue, job, delay)

        def forget(queue: str, job: Job) -> None:
            forget_exceptions(store, persist, queue, job)

        return cls(count, forget)

    def retry_delay(self, queue: str, job: Job, delay: float, exc: BaseException) -> float | None:
        limit = job.max_exceptions
        if limit is None or isinstance(exc, TaskTimeout):  # a timeout is not counted
            return delay
        return None if self.count(queue, job, delay) >= limit else delay

    def after_succeeded(self, queue: str, job: Job, duration: float) -> None:
        if job.attempts > 1:  # an earlier attempt may have raised
            self.forget(queue, job)

    def after_failed(self, queue: str, job: Job | None, duration: float | None) -> None:
        if job is not None:
            self.forget(queue, job)

    def after_cancelled(self, queue: str, job: Job, duration: float | None) -> None:
        self.forget(queue, job)


def _count_in_redis(store: RedisQueue, persist: Persist, queue: str, job: Job, delay: float) -> int:
    """The task's exceptions so far, this one included (count_exception.lua); 0 if
    its counter is not a count (a key of another type): it is then not counted."""
    keep_ms = round((delay + _COUNT_SLACK) * 1000)
    try:
        return persist(lambda: store.count_exception(queue, job.id, keep_ms))
    except redis.ResponseError as exc:
        log.error("task %s (%s): its exceptions cannot be counted: %s", job.task, job.id, exc)
        return 0


def forget_exceptions(store: RedisQueue, persist: Persist, queue: str, job: Job) -> None:
    """A task with ``max_exceptions`` that finished for good leaves no count behind."""
    if job.max_exceptions is not None:
        persist(lambda: store.forget_exceptions(queue, job.id))
