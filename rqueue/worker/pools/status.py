"""Each supervised pool's status in Redis: its parents' targets and its last decision.

``rqueue supervise`` writes one entry a pool (a msgpack map under
``GlobalKeys.pool("host/pool")``) after each scaling step, with a time to live a few
steps long, and lists it in ``GlobalKeys.pools``; ``rqueue workers`` and the dashboard
read them back. Entries are hostile data when read: one that does not read as a pool
is left out. Global keys: never in one pipeline or script with a queue's keys.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import msgpack

from rqueue.store.queue import RedisQueue
from rqueue.worker.pools.config import Pool
from rqueue.worker.pools.plan import Parent
from rqueue.worker.pools.scaling import Decision, QueueLoad

_MAX_POOLS = 10_000


@dataclass(frozen=True)
class PoolStatus:
    """A pool as its supervisor last described it."""

    host: str
    pid: int
    name: str
    balance: str
    min_processes: int
    max_processes: int
    parents: tuple[tuple[str, int, int], ...]
    """Each parent's queues (comma-separated), its target and what it wanted."""
    inputs: tuple[tuple[str, int, int, float | None, float | None], ...]
    """Each queue's ready, reserved, oldest wait and mean runtime, as measured."""
    decided: float
    """Epoch seconds of the decision, on the supervisor's clock."""

    @property
    def processes(self) -> int:
        return sum(target for _, target, _ in self.parents)

    def why(self) -> str:
        """The decision's inputs in a line."""
        return "; ".join(line(QueueLoad(*measured)) for measured in self.inputs)


def line(load: QueueLoad) -> str:
    """A queue's measured load as the log and ``rqueue workers`` show it."""
    waited = "-" if load.oldest_wait is None else f"{load.oldest_wait:.1f} s"
    ran = "runtime ?" if load.runtime is None else f"runtime {load.runtime * 1000:.1f} ms"
    return f"{load.queue}: {load.ready} ready, {load.reserved} reserved, oldest {waited}, {ran}"


def write(store: RedisQueue, pool: Pool, parents: tuple[Parent, ...], decision: Decision) -> None:
    """Record ``pool``'s last ``decision`` for ``parents`` (their targets, in order)."""
    host = socket.gethostname()
    entry = {
        "host": host,
        "pid": os.getpid(),
        "name": pool.name,
        "balance": pool.balance,
        "min": pool.min_processes,
        "max": pool.max_processes,
        "parents": [
            [",".join(p.queues), target, wanted]
            for p, target, wanted in zip(parents, decision.targets, decision.wanted, strict=True)
        ],
        "inputs": [
            [load.queue, load.ready, load.reserved, load.oldest_wait, load.runtime]
            for load in decision.loads
        ],
        "decided": time.time(),
    }
    ttl_ms = round((3 * pool.balance_cooldown + 10) * 1000)
    keys, pool_id = store.global_keys, f"{host}/{pool.name}"
    now_ms = round(time.time() * 1000)
    pipe = store.client.pipeline(transaction=False)
    pipe.set(keys.pool(pool_id), msgpack.packb(entry), px=ttl_ms)
    pipe.zadd(keys.pools, {pool_id: now_ms + ttl_ms})
    pipe.zremrangebyscore(keys.pools, "-inf", now_ms)
    pipe.execute()


def leave(store: RedisQueue, pools: tuple[Pool, ...]) -> None:
    """Remove the pools' entries (their supervisor stops)."""
    host, keys = socket.gethostname(), store.global_keys
    ids = [f"{host}/{pool.name}" for pool in pools]
    pipe = store.client.pipeline(transaction=False)
    pipe.delete(*(keys.pool(pool_id) for pool_id in ids))
    pipe.zrem(keys.pools, *ids)
    pipe.execute()


def list_pools(store: RedisQueue) -> list[PoolStatus]:
    """Every pool whose status has not expired, by host and name."""
    keys = store.global_keys
    members: list[Any] = store.client.zrange(keys.pools, 0, _MAX_POOLS - 1)
    ids = [m.decode("utf-8", "replace") for m in members if isinstance(m, bytes)]
    if not ids:
        return []
    entries = store.client.mget([keys.pool(pool_id) for pool_id in ids])
    found = [_status(entry) for entry in entries if isinstance(entry, bytes)]
    return sorted((s for s in found if s is not None), key=lambda s: (s.host, s.name))


def _status(raw: bytes) -> PoolStatus | None:
    try:
        e = msgpack.unpackb(raw, raw=False, strict_map_key=False)
        status = PoolStatus(
            e["host"],
            e["pid"],
            e["name"],
            e["balance"],
            e["min"],
            e["max"],
            tuple((p[0], p[1], p[2]) for p in e["parents"]),
            tuple((i[0], i[1], i[2], i[3], i[4]) for i in e["inputs"]),
            e["decided"],
        )
    except Exception:  # any shape but ours: not a pool this version can show
        return None
    texts = [status.host, status.name, status.balance, *(p[0] for p in status.parents)]
    numbers = [status.pid, status.min_processes, status.max_processes]
    numbers += [n for p in status.parents for n in p[1:]]
    if not all(type(t) is str and len(t) <= 1000 for t in texts):
        return None
    numbers += [n for i in status.inputs for n in i[1:3]]
    if not all(type(n) is int for n in numbers):
        return None
    measures = [m for i in status.inputs for m in i[3:]] + [status.decided]
    if not all(m is None or type(m) in (int, float) for m in measures):
        return None
    if not all(type(i[0]) is str and len(i[0]) <= 1000 for i in status.inputs):
        return None
    return status
