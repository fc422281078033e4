"""The Redis side of the built-in middleware: one script call per check-and-set.

Each guard's state is a key of the task's queue (``QueueKeys.middleware``), so in the
queue's hash slot: on Redis Cluster the script runs where the queue lives.
"""

from __future__ import annotations

from typing import NamedTuple

from rqueue.store.keys import QueueKeys
from rqueue.store.queue import RedisQueue

BREAKER_STATES = ("closed", "open", "half-open")


class Slot(NamedTuple):
    """What a concurrency slot is: ``limit`` of them per key, each held ``lasting``
    seconds at most."""

    limit: int
    lasting: float


def take_cell(
    queue: RedisQueue, name: str, key: str, task_id: str, limit: int, per: float
) -> float:
    """0 if a rate-limited run may start now, else seconds until the cell taken for it
    (rate_limit.lua): at most ``limit`` runs start per ``per`` seconds."""
    keys = queue.keys(name)
    script_keys = (keys.middleware("rate", key), keys.middleware("rate-cells", key))
    args = (task_id, per * 1000 / limit)
    return int(queue.scripts.rate_limit(queue.side, script_keys, args)) / 1000


def lock(queue: RedisQueue, name: str, key: str, token: str, lasting: float) -> float:
    """0 if the run holding ``token`` has the lock now (lock.lua), for ``lasting``
    seconds at most; else the seconds its holder may keep it."""
    script_keys = (queue.keys(name).middleware("lock", key),)
    args = (token, max(1, round(lasting * 1000)))
    return int(queue.scripts.lock(queue.side, script_keys, args)) / 1000


def unlock(queue: RedisQueue, name: str, key: str, token: str) -> bool:
    """Free the lock if ``token`` holds it (unlock.lua); False if another run does."""
    script_keys = (queue.keys(name).middleware("lock", key),)
    return bool(queue.scripts.unlock(queue.side, script_keys, (token,)))


def take_slot(
    queue: RedisQueue, name: str, key: str, token: str, slot: Slot, payload: bytes
) -> tuple[int, float]:
    """``(0, 0)`` if the run holding ``token`` has one of the key's slots now
    (slot_take.lua); else ``(1, seconds)`` if its ``payload`` (b"": do not park) was
    parked to wait for a slot, or ``(2, seconds)`` if not (the caller releases it),
    with the seconds until the earliest slot expires."""
    keys = queue.keys(name)
    queue_keys = (keys.reserved, keys.delayed, keys.timer, keys.pending_ids, keys.cancelling)
    script_keys = (*_slot_keys(keys, key), *queue_keys)
    args = (token, slot.limit, max(1, round(slot.lasting * 1000)), payload)
    code, wait = queue.scripts.slot_take(queue.side, script_keys, args)
    return int(code), int(wait) / 1000


def free_slot(queue: RedisQueue, name: str, key: str, token: str) -> int:
    """Free the slot ``token`` holds and wake the first parked call (slot_free.lua):
    0 if it held none (expired), 1 if none waited, 2 if one was made ready."""
    keys = queue.keys(name)
    script_keys = (*_slot_keys(keys, key), keys.delayed, keys.ready, keys.notify, *keys.levels)
    return int(queue.scripts.slot_free(queue.side, script_keys, (token,)))


def _slot_keys(keys: QueueKeys, key: str) -> tuple[str, str]:
    """A key's slots and its line of parked calls (slot_take.lua, slot_free.lua)."""
    return keys.middleware("slots", key), keys.middleware("slot-waiters", key)


def breaker(
    queue: RedisQueue,
    name: str,
    key: str,
    mode: str,
    token: str = "",
    limit: int = 1,
    decay: float = 1.0,
    trial: float = 1.0,
) -> float:
    """One step of a circuit breaker (breaker.lua): ``check`` gives 0 or the seconds
    to wait; ``success``/``failure`` report a run; ``state`` gives an index into
    :data:`BREAKER_STATES`."""
    script_keys = (queue.keys(name).middleware("breaker", key),)
    args = (mode, token, limit, round(decay * 1000), round(trial * 1000))
    reply = int(queue.scripts.breaker(queue.side, script_keys, args))
    return reply / 1000 if mode == "check" else reply
