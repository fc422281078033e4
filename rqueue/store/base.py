"""What every role of :class:`~rqueue.store.queue.RedisQueue` shares.

A ``RedisQueue`` is one object to its callers, composed of three roles
(``producer``, ``consumer``, ``admin``); each role is a class over this base, which
holds the connections, the scripts, the key names and the registry of queues
(``rqueue:queues``), which producers and workers both keep filled.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence

import redis

from rqueue.settings.config import Config
from rqueue.store.cluster import ClusterClient
from rqueue.store.connect import connect
from rqueue.store.keys import GlobalKeys, QueueKeys
from rqueue.store.retry import REDIS_ERRORS
from rqueue.store.scripts import Scripts
from rqueue.store.waits import ShardedWaits
from rqueue.store.wire import Wire

REGISTRY_REFRESH = 60.0
"""Seconds between a producer's re-adds of its queues to the registry (``rqueue:queues``),
which FLUSHALL or a restart without persistence may empty. One round trip of its own
per queue a minute: a global key never shares a pipeline with a queue's script (on
Redis Cluster they live on different nodes). Worker parents re-add theirs every tick."""


class QueueBase:
    """A connection to rqueue's keys on one Redis: clients, scripts and key names."""

    def __init__(self, config: Config, client: redis.Redis | None = None) -> None:
        self.config = config
        self.client = client if client is not None else connect(config)
        self.wire = Wire(self.client)
        self.side = Wire(self.client)
        """A second lean connection, for the calls a worker child makes while its next
        reserve call is in flight on ``wire``: a workflow's pushes and batch counts."""
        self.scripts = Scripts()
        self.global_keys = GlobalKeys.for_prefix(config.prefix, config.cluster)
        self._waits = ShardedWaits(self.client) if isinstance(self.client, ClusterClient) else None
        self._keys: dict[str, QueueKeys] = {}
        self._leveled: set[str] = set()
        """Queues whose reserve calls pass their priority levels' lists: reserve.lua
        asked for them once (a queue without levels in use is spared those 10 keys)."""
        self._registered: dict[str, float] = {}
        """Queue name -> when (monotonic) this process last added it to the registry."""

    def keys(self, queue: str) -> QueueKeys:
        keys = self._keys.get(queue)
        if keys is None:
            keys = QueueKeys.for_queue(queue, self.config.prefix, self.config.cluster)
            self._keys[queue] = keys
        return keys

    def same_slot(self, queue: str, other: str) -> bool:
        """Whether one script may touch both queues' keys: always on a single Redis;
        on Redis Cluster only the same queue (each queue's name is its hash tag)."""
        return not self.config.cluster or queue == other

    def remember_queues(self, queues: Iterable[str]) -> None:
        """Add ``queues`` to the registry (``rqueue:queues``) now."""
        names = [self.keys(queue).name for queue in queues]
        if names:
            self.client.sadd(self.global_keys.known_queues, *names)
            self._registered.update(dict.fromkeys(names, time.monotonic()))

    def _register_if_due(self, queues: Sequence[str]) -> None:
        """Re-add queues to the registry once a minute (see REGISTRY_REFRESH).

        Best effort: if Redis cannot take it now, the push that follows reports why,
        and the next dispatch tries again.
        """
        now = time.monotonic()
        due = [q for q in queues if now - self._registered.get(q, -math.inf) >= REGISTRY_REFRESH]
        if due:
            try:
                self.remember_queues(due)
            except (*REDIS_ERRORS, redis.ResponseError):
                pass
