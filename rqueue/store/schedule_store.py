"""Schedules in Redis: where they live and how they change, as bytes and fire times.

A schedule lives beside the queue it fires into (``queues:<name>:schedules``, a zset
of name -> next fire time, and ``queues:<name>:schedule-defs``, the definitions), so
each of its scripts touches one hash slot; a global hash maps each name to its queue,
so a schedule is found by its name alone. :mod:`rqueue.schedules` owns the definition's
format and all timing; it reads and writes through :class:`ScheduleStore` and never
names a key or a script. Every write is a compare-and-set against the definition's
bytes as they were read, which is what makes concurrent changes and firings safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from rqueue.store.queue import RedisQueue
from rqueue.store.scripts import execute
from rqueue.store.signing import sign


class StoredSchedule(NamedTuple):
    """A definition as stored, and its place on the timeline (None: paused or finished)."""

    definition: bytes
    next_ms: int | None


class Firing(NamedTuple):
    """One fire_schedule.lua call: what a worker read, and what it writes if still so."""

    queue: str
    name: bytes
    read_ms: int
    """The fire time this worker read from the timeline (the trigger it fires from)."""
    read: bytes
    """The definition bytes this worker read."""
    next_ms: int | None
    """The next fire time, None once the schedule is finished."""
    definition: bytes
    """The new definition (its last run and finished flag)."""
    payloads: Sequence[bytes]
    """One task per trigger to enqueue, unsigned: signed here like every push."""


def _ms(time_reply: Any) -> int:
    sec, micro = time_reply
    return int(sec) * 1000 + int(micro) // 1000


class ScheduleStore:
    """The schedules of one Redis, by name."""

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue
        self.client = queue.client

    def now_ms(self) -> int:
        """Redis's clock (``TIME``), the only one rqueue trusts."""
        return _ms(self.client.time())

    # -- the name index --------------------------------------------------------------

    def claim_name(self, name: str, queue: str) -> bool:
        """Enter ``name`` in the index as firing into ``queue``; False if it is taken."""
        return bool(self.client.hsetnx(self.queue.global_keys.schedule_index, name, queue))

    def release_name(self, name: str) -> None:
        self.client.hdel(self.queue.global_keys.schedule_index, name)

    def _queue_of(self, name: str) -> str | None:
        queue: bytes | None = self.client.hget(self.queue.global_keys.schedule_index, name)  # type: ignore[assignment]
        return None if queue is None else queue.decode()

    # -- reading ---------------------------------------------------------------------

    def get(self, name: str) -> StoredSchedule | None:
        queue = self._queue_of(name)
        if queue is None:
            return None
        keys = self.queue.keys(queue)
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(keys.schedule_defs, name)
        pipe.zscore(keys.schedules, name)
        definition, score = pipe.execute()
        if definition is None:
            return None
        return StoredSchedule(definition, None if score is None else int(score))

    def all(self) -> list[StoredSchedule]:
        """Every schedule in the index, read queue by queue in one round trip."""
        index: dict[bytes, bytes] = self.client.hgetall(self.queue.global_keys.schedule_index)  # type: ignore[assignment]
        queues = sorted({q.decode() for q in index.values()})
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            keys = self.queue.keys(queue)
            pipe.hgetall(keys.schedule_defs)
            pipe.zrange(keys.schedules, 0, -1, withscores=True)
        replies = pipe.execute()
        found: list[StoredSchedule] = []
        for i in range(len(queues)):
            definitions, scores = replies[2 * i], dict(replies[2 * i + 1])
            for member, definition in definitions.items():
                score = scores.get(member)
                found.append(StoredSchedule(definition, None if score is None else int(score)))
        return found

    def definition(self, queue: str, name: str) -> bytes | None:
        """The definition's bytes alone: what a compare-and-set compares against."""
        found: bytes | None = self.client.hget(self.queue.keys(queue).schedule_defs, name)  # type: ignore[assignment]
        return found

    # -- changing --------------------------------------------------------------------

    def save(
        self, queue: str, name: str, read: bytes, definition: bytes, next_ms: int | None
    ) -> bool:
        """Store ``definition`` at ``next_ms`` (None: off the timeline) and wake the
        queue's workers, if the stored definition is still ``read`` (``b""``: none).

        False if it changed since (save_schedule.lua).
        """
        keys = self.queue.keys(queue)
        saved = self.queue.scripts.save_schedule(
            self.client,
            (keys.schedules, keys.schedule_defs, keys.timer),
            (name, read, definition, -1 if next_ms is None else next_ms),
        )
        return bool(saved)

    def remove(self, name: str) -> bool:
        """Delete a schedule, also one half-written by a crashed add; False if unknown."""
        queue = self._queue_of(name)
        if queue is None:
            return False
        keys = self.queue.keys(queue)
        self.queue.scripts.remove_schedule(
            self.client, (keys.schedules, keys.schedule_defs), (name,)
        )
        self.release_name(name)
        return True

    # -- firing ----------------------------------------------------------------------

    def earliest(
        self, queues: Sequence[str], count: int
    ) -> tuple[int, list[list[tuple[bytes, float]]]]:
        """Redis's clock and, per queue, its first ``count`` ``(name, fire time)`` pairs
        on the timeline, read together so "due" means due by that clock."""
        pipe = self.client.pipeline(transaction=False)
        pipe.time()
        for queue in queues:
            pipe.zrange(self.queue.keys(queue).schedules, 0, count - 1, withscores=True)
        replies = pipe.execute()
        return _ms(replies[0]), replies[1:]

    def definitions(self, schedules: Sequence[tuple[str, bytes]]) -> list[bytes | None]:
        """The definitions of ``(queue, name)`` pairs, in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for queue, name in schedules:
            pipe.hget(self.queue.keys(queue).schedule_defs, name)
        found: list[bytes | None] = pipe.execute()
        return found

    def fire(self, firings: Sequence[Firing]) -> list[bool]:
        """Send every firing in one round trip; True for each this worker won."""
        secret = self.queue.config.secret
        pipe = self.client.pipeline(transaction=False)
        for firing in firings:
            keys = self.queue.keys(firing.queue)
            payloads = [sign(p, secret) for p in firing.payloads] if secret else firing.payloads
            self.queue.scripts.fire_schedule.queue(
                pipe,
                (keys.schedules, keys.schedule_defs, keys.ready, keys.notify, keys.pending_ids),
                (
                    firing.name,
                    firing.read_ms,
                    firing.read,
                    -1 if firing.next_ms is None else firing.next_ms,
                    firing.definition,
                    *payloads,
                ),
            )
        return [bool(won) for won in execute(pipe, self.queue.scripts)]
