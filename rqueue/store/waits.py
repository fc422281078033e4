"""Waiting on several queues of a Redis Cluster at once.

On one server a single ``BLPOP`` covers every queue a worker serves. On a cluster
the queues live in different slots, often on different nodes, and one ``BLPOP`` may
only name keys of one slot. So each key gets a blocking connection of its own, all
sent at once and read with ``select``: whichever queue is pushed to first wakes the
worker within a round trip, wherever it lives.

When one wakes, the others are still blocked. Left so, they would take the next
push's wake-up while this worker is busy, and an idle worker would sleep through
it; so each is ended at once with ``CLIENT UNBLOCK``, sent on a connection of its
node's without waiting for the answer, and the worker goes on to reserve. Those
answers, and the ended BLPOPs' replies, are read at the start of the next wait: a
BLPOP that took a push in between counts as a wake-up then.

A connection per key does not scale to thousands of queues: a worker child of 10^4
opened 10^4 (redis-py's "Too many connections", and Redis's ``maxclients`` shared by
every child). BLPOP cannot group them by node either, since its keys must share a
slot and each queue has a slot of its own. So above ``BLOCKED_MOST`` keys a wait
polls instead: it looks at every key (``probe.py``: commands sent 1,000 at a time on
a connection per node, about 90 ms of CPU for 10^4 keys) and pops from the first that
holds a signal, as BLPOP would. It sleeps between looks, 50 ms at first, twice as long after
each look that found nothing, up to 1 s, and back to 50 ms once one wakes it (not a
look at the very end of a wait: the caller looks at its queues anyway when the wait
ends). So the connections are the client's own, one per node, and the cost is
wake-up latency: a push to a worker idle for a few seconds is seen within about a
second (a probe of the ready lists by the child), where a BLPOP would see it at once.
"""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Sequence

import redis
from redis.connection import ConnectionInterface
from redis.exceptions import AskError

from rqueue.store import probe
from rqueue.store.cluster import Address, ClusterClient
from rqueue.store.retry import REDIS_ERRORS

_BLOCK_MARGIN = 1.0
"""Seconds a BLPOP outlasts the wait: ended by CLIENT UNBLOCK, not by Redis's timer."""
BLOCKED_MOST = 64
"""Keys a wait blocks on, a connection each; a wait on more polls them (see the module)."""
_POLL_FIRST = 0.05
_POLL_LONGEST = 1.0


class _Blocked:
    """One key's blocking connection, its node, and the client id that can unblock it."""

    def __init__(self, node: Address, connection: ConnectionInterface, client_id: int) -> None:
        self.node = node
        self.connection = connection
        self.client_id = client_id
        self.pending = False
        """A BLPOP was sent and its reply not read yet."""


class ShardedWaits:
    """``BLPOP`` on keys of many slots, one connection per key, or a poll of them all
    when they are more than ``BLOCKED_MOST`` (see the module)."""

    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self._blocked: dict[str, _Blocked] = {}
        self._unblockers: dict[Address, ConnectionInterface] = {}
        self._unread: dict[Address, int] = {}
        """Per node, CLIENT UNBLOCK replies not read yet."""
        self._pid = os.getpid()
        self._poll_every = _POLL_FIRST
        """Seconds between two looks of a polled wait: grows while nothing wakes it."""

    def wait(self, keys: Sequence[str], timeout: float) -> str | None:
        """Block until one of ``keys`` gets an element (taken; that key is returned) or
        ``timeout`` passes (None)."""
        if self._pid != os.getpid():  # forked: the parent's sockets are not ours
            self._blocked, self._unblockers, self._unread = {}, {}, {}
            self._pid = os.getpid()
        errors: list[Exception] = []
        if woken := self._settle(errors):
            return woken  # a wait ended last time took a push meanwhile
        if len(keys) > BLOCKED_MOST:
            return self._polled(keys, timeout)
        sent: dict[str, _Blocked] = {}
        for key in keys:
            try:
                blocked = self._connection(key)
                blocked.connection.send_command("BLPOP", key, round(timeout + _BLOCK_MARGIN, 3))  # type: ignore[no-untyped-call]
            except REDIS_ERRORS as exc:
                self._blocked.pop(key, None)
                errors.append(exc)
                continue
            blocked.pending = True
            sent[key] = blocked
        if not sent:
            raise errors[0]
        with selectors.DefaultSelector() as selector:
            for key, blocked in sent.items():
                selector.register(blocked.connection._sock, selectors.EVENT_READ, key)  # type: ignore[attr-defined]
            ready = {k.data for k, _ in selector.select(timeout)}
        woken = None
        for key, blocked in sent.items():
            if key in ready:
                woken = self._read(key, blocked, errors) or woken
            else:
                self._unblock(key, blocked)
        if errors and not woken:
            raise errors[0]
        return woken

    def _polled(self, keys: Sequence[str], timeout: float) -> str | None:
        """Wait by looking at ``keys`` now and then (see the module): the key popped."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(self._poll_every, left))
            if time.monotonic() >= deadline:
                return None
            for key, length in zip(keys, probe.lengths(self.client, keys), strict=True):
                if length and self.client.lpop(key) is not None:
                    self._poll_every = _POLL_FIRST
                    return key
            self._poll_every = min(2 * self._poll_every, _POLL_LONGEST)
        return None

    def _settle(self, errors: list[Exception]) -> str | None:
        """Read what the last wait left unread; the key of an ended BLPOP that took a
        push meanwhile, if one did."""
        for node, count in list(self._unread.items()):
            connection = self._unblockers[node]
            try:
                for _ in range(count):
                    connection.read_response()
            except (*REDIS_ERRORS, redis.ResponseError):
                connection.disconnect()  # type: ignore[no-untyped-call]
            self._unread[node] = 0
        woken = None
        for key, blocked in list(self._blocked.items()):
            if blocked.pending:
                woken = self._read(key, blocked, errors) or woken
        return woken

    def _read(self, key: str, blocked: _Blocked, errors: list[Exception]) -> str | None:
        """Read one BLPOP's reply; ``key`` if it took an element (or the slot moved: the
        caller then looks at the queues again, and comes back), else None."""
        blocked.pending = False
        try:
            return None if blocked.connection.read_response() is None else key
        except REDIS_ERRORS as exc:
            self._forget(key, blocked)
            errors.append(exc)
            return None
        except redis.ResponseError as exc:  # MOVED: the slot is served elsewhere now
            self._forget(key, blocked)
            if isinstance(exc, AskError):
                self.client.slots.moved(exc)
            return key

    def _connection(self, key: str) -> _Blocked:
        blocked = self._blocked.get(key)
        if blocked is None:
            node = self.client.slots.address(("BLPOP", key))
            connection = self._connect(node)
            connection.send_command("CLIENT", "ID")  # type: ignore[no-untyped-call]
            client_id = int(connection.read_response())
            blocked = self._blocked[key] = _Blocked(node, connection, client_id)
        return blocked

    def _connect(self, node: Address) -> ConnectionInterface:
        return self.client.slots.client(node).connection_pool.make_connection()

    def _unblock(self, key: str, blocked: _Blocked) -> None:
        """Send CLIENT UNBLOCK for a BLPOP still waiting, and do not wait for it (see
        the module); if its node cannot be asked, drop the BLPOP's connection."""
        unblocker = self._unblockers.get(blocked.node)
        try:
            if unblocker is None:
                unblocker = self._unblockers[blocked.node] = self._connect(blocked.node)
            unblocker.send_command("CLIENT", "UNBLOCK", blocked.client_id)  # type: ignore[no-untyped-call]
        except REDIS_ERRORS:
            if unblocker is not None:
                unblocker.disconnect()  # type: ignore[no-untyped-call]
            self._unblockers.pop(blocked.node, None)
            self._unread.pop(blocked.node, None)
            self._forget(key, blocked)
            return
        self._unread[blocked.node] = self._unread.get(blocked.node, 0) + 1

    def _forget(self, key: str, blocked: _Blocked) -> None:
        self._blocked.pop(key, None)
        blocked.connection.disconnect()  # type: ignore[no-untyped-call]
        self.client.slots.lost()
