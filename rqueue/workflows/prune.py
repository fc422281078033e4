"""Pruning batches (``rqueue batches prune``; Laravel's ``queue:prune-batches``).

A finished batch expires by itself a week after it finished (``KEEP_FINISHED_MS``);
pruning deletes it sooner. It also drops the entries of the batch list (``rqueue
batches list``) whose batch is gone, which nothing else does: the list is one global
key, and the scripts that finish and expire a batch may touch only the batch's own
hash slot.
"""

from __future__ import annotations

from typing import NamedTuple

import redis

from rqueue.errors import InvalidPayload
from rqueue.store.batch_store import BatchStore
from rqueue.store.default import default_queue
from rqueue.store.queue import RedisQueue

_EVERY_BATCH = 2**31 - 1
"""A limit for ``BatchStore.listed`` that no list of batches reaches."""


class Pruned(NamedTuple):
    """What :func:`prune_batches` did."""

    finished: int
    """Finished batches deleted, with their keys."""
    gone: int
    """List entries dropped whose batch had already expired."""
    unreadable: int
    """List entries left alone: not a batch id, or a state that does not parse (or is
    not a hash). Something other than rqueue wrote them; a person should look."""


def prune_batches(hours: float, connection: RedisQueue | None = None) -> Pruned:
    """Delete the batches that finished more than ``hours`` ago, and drop the list
    entries whose batch is gone. Batches still running, cancelled or not, stay.

    Times are Redis's (batch scripts write ``finished_at`` with ``TIME``): read once,
    on the node of the first finished batch. On Redis Cluster the nodes' clocks differ
    by far less than the hours this is measured in.
    """
    store = BatchStore(connection or default_queue())
    queue = store.queue
    finished, gone, unreadable = [], [], 0
    cutoff: float | None = None
    for batch_id in store.listed(_EVERY_BATCH):
        try:
            state = store.read(batch_id)
        except (ValueError, InvalidPayload, redis.ResponseError):
            unreadable += 1
            continue
        if state is None:
            gone.append(batch_id)
        elif state.finished_at is not None:
            if cutoff is None:
                now_ms = int(queue.scripts.clock(queue.client, (store.keys(batch_id).state,), ()))
                cutoff = now_ms / 1000 - hours * 3600
            if state.finished_at <= cutoff:
                finished.append(batch_id)
    store.forget(finished + gone)
    return Pruned(len(finished), len(gone), unreadable)
