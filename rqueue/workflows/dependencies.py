"""Applying the notices of finished tasks that others wait for (``using(after=...)``).

The script that writes a task's outcome leaves a notice on its queue's ``resolved``
list when tasks wait for it (lua/dependents.lua) and wakes the queue's worker parents,
which drain the list on their tick (``worker/supervisor.py``; ``rqueue.testing`` does
the same). Each notice is applied to every task it names
(:func:`rqueue.tasks.dependencies.apply`, in that task's own slot) and only then
removed: a worker killed in between leaves it for the next, which applies it again
and changes nothing. A notice or an entry in it that does not parse (Redis's data is
not trusted) is logged and dropped alone.
"""

from __future__ import annotations

import logging
from typing import Any

import msgpack
import redis

from rqueue.errors import InvalidQueueName
from rqueue.store import dependencies as store
from rqueue.store.keys import validate_queue_name
from rqueue.store.queue import RedisQueue
from rqueue.tasks.dependencies import Outcome, apply, outcome_of

log = logging.getLogger("rqueue.dependencies")

DRAIN = 100
"""Notices applied per queue per call: a tick is never held long by a flood of them."""


def drain(queue: RedisQueue, name: str, count: int = DRAIN) -> int:
    """Apply and remove up to ``count`` notices of queue ``name``; how many it read."""
    found = store.notices(queue, name, count)
    for notice in found:
        outcome, members = _read(name, notice)
        for entry in members:
            _apply_entry(queue, entry, outcome)
    if found:
        store.forget_notices(queue, name, found)
    return len(found)


def _read(name: str, notice: bytes) -> tuple[Outcome, list[Any]]:
    """A notice's outcome and its entries; none if it is not a notice."""
    try:
        raw_id, record, members = msgpack.unpackb(notice, raw=True)
        task_id = bytes(raw_id).hex()
        if len(raw_id) != 16 or not isinstance(members, list):
            raise ValueError("not [id, record, entries]")
        return outcome_of(name, task_id, bytes(record)), members
    except Exception as exc:
        log.warning("queue %s: a notice that cannot be read was dropped: %s", name, exc)
        return Outcome("", name, "unreadable"), []


def _apply_entry(queue: RedisQueue, entry: Any, outcome: Outcome) -> None:
    """Apply ``outcome`` to the waiting task ``entry`` names (``index:id:queue``)."""
    try:
        index, task_id, name = bytes(entry).decode().split(":", 2)
        validate_queue_name(name)
        if not index.isdigit() or len(task_id) != 32:
            raise ValueError("not index:id:queue")
        apply(queue, name, task_id, int(index), outcome)
    except (ValueError, TypeError, InvalidQueueName, redis.ResponseError) as exc:
        log.warning(
            "task %s: the tasks waiting for it: an entry %r was dropped: %s",
            outcome.id,
            entry,
            exc,
        )
