"""The Redis queue operations: every state change of a task, as one script call each.

Producers, workers and the CLI all hold one :class:`RedisQueue` (Laravel's name for
the same object) and call it; it is composed of three roles, each in a module of its
own: :class:`~rqueue.store.producer.Producer` queues tasks,
:class:`~rqueue.store.consumer.Consumer` is a worker's side from reserve to settle,
:class:`~rqueue.store.admin.Admin` reads and steers queues as a whole. They share
:class:`~rqueue.store.base.QueueBase` (connections, scripts, key names), and lay out
every script's KEYS and ARGV through :mod:`rqueue.store.calls`.

The values those methods take and return are exported here too, so a caller imports
from one module whatever role it uses.
"""

from __future__ import annotations

from rqueue.store.admin import Admin, QueueSize
from rqueue.store.calls import Kept, Push, UniqueLock
from rqueue.store.consumer import Consumer, Migration, Reservation
from rqueue.store.producer import Producer

__all__ = [
    "Kept",
    "Migration",
    "Push",
    "QueueSize",
    "RedisQueue",
    "Reservation",
    "UniqueLock",
]


class RedisQueue(Producer, Consumer, Admin):
    """A connection to rqueue's keys on one Redis: producing, consuming, administering."""
