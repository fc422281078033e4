"""Rebuilding a task's handle from its id alone (Celery's ``AsyncResult(id)``)."""

from __future__ import annotations

from rqueue.store.default import default_queue
from rqueue.store.queue import RedisQueue
from rqueue.store.results import find_queue
from rqueue.tasks.handles import Dispatched


def result_of(
    task_id: str, queue: str | None = None, connection: RedisQueue | None = None
) -> Dispatched:
    """A handle on task ``task_id``: ``status()``, ``result(timeout)``, ``cancel()``.

    Without ``queue``, the known queues are searched for its result record (one
    round trip per node); if none holds one, the handle points at ``default`` and its
    status reads ``unknown``.
    """
    redis_queue = connection or default_queue()
    name = queue or find_queue(redis_queue, task_id) or "default"
    return Dispatched(task_id, "", name, redis_queue)
