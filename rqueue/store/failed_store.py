"""A queue's failed list in Redis: reading, retrying, forgetting and flushing records as bytes.

:mod:`rqueue.failed` owns the record format and decides which records to act on; the
key names and the scripts stay here, so that module never learns where a queue's
failed records live.

The store is the queue's failed list, ``queues:<name>:failed``: one element per
failure, the newest at the head, so ``LLEN`` counts them and ``LRANGE`` reads them in
order, as the product's design says. Beside it a lookup, a sorted set of
``<task id>#<n>`` -> a rising sequence number, ranked as the list is ordered, finds a
record by its id without a scan: its member's rank is its index in the list
(``lua/failed_list.lua`` states the invariant; every script that changes the list
keeps it). So a page reads only its window, a record is found by its id in O(log n),
and one is retried or forgotten by marking it in place and removing the mark from the
nearer end of the list: the newest or the oldest of a million cost what they cost in a
list of a thousand, one in the middle a scan of half the list inside Redis (a few ms).
Nothing here reads or changes more than a bounded chunk in one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from rqueue.store.header import payload_id
from rqueue.store.queue import RedisQueue
from rqueue.store.scripts import execute
from rqueue.store.wire import KeyOrArg


class Held(NamedTuple):
    """One record found by its id: its member in the lookup and its bytes."""

    member: bytes
    record: bytes


def record_key(task_id: str, n: int = 1) -> bytes:
    """The lookup member of the ``n``-th record of ``task_id`` (``<id>#<n>``)."""
    return f"{task_id}#{n}".encode("utf-8", "surrogateescape")


class FailedStore:
    """The failed lists of the queues of one Redis."""

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue

    def counts(self, queues: Sequence[str], per_call: int) -> list[int]:
        """How many records each of ``queues`` holds (``LLEN``s, ``per_call`` a round trip)."""
        found: list[int] = []
        for start in range(0, len(queues), per_call):
            pipe = self.queue.client.pipeline(transaction=False)
            for queue in queues[start : start + per_call]:
                pipe.llen(self.queue.keys(queue).failed)
            found += [int(count) for count in pipe.execute()]
        return found

    def window(
        self, queue: str, first: int, last: int, newest_first: bool
    ) -> list[tuple[bytes, bytes]]:
        """``(member, record)`` of the records ranked ``first`` to ``last`` (inclusive,
        from the oldest or the newest), in that order, read in one step (read_failed.lua)."""
        order = "1" if newest_first else "0"
        members, records = self.queue.scripts.read_failed(
            self.queue.client, self._keys(queue), ("window", first, last, order)
        )
        return list(zip(members, records, strict=True))

    def records_of(
        self, queues: Sequence[str], task_ids: Sequence[str], per_call: int
    ) -> list[list[Held]]:
        """Every record of each of ``task_ids`` in each of ``queues``, a list per queue
        (an id's records oldest first): one read_failed.lua call per queue, ``per_call``
        queues a round trip, each O(log n) a record found."""
        if not task_ids:
            return [[] for _ in queues]
        found: list[list[Held]] = []
        args: list[KeyOrArg] = ["ids", *task_ids]
        for start in range(0, len(queues), per_call):
            pipe = self.queue.client.pipeline(transaction=False)
            for queue in queues[start : start + per_call]:
                self.queue.scripts.read_failed.queue(pipe, self._keys(queue), args)
            replies: list[Any] = execute(pipe, self.queue.scripts)
            found += [
                [Held(*pair) for pair in zip(members, records, strict=True)]
                for members, records in replies
            ]
        return found

    def retry(self, queue: str, retries: Sequence[tuple[bytes, bytes, bytes]]) -> int:
        """Take each ``(member, record, payload)``'s record off the failed list and push
        its payload, all in one step (retry_failed.lua); how many records were still there.

        ``member`` is where the record was read (or :func:`record_key` of its id): the
        script finds it there or among its id's other members by its exact bytes. A
        record gone already was retried or forgotten by someone else: it pushes nothing.
        """
        if not retries:
            return 0
        keys = self.queue.keys(queue)
        script_keys = [*self._keys(queue), keys.ready, keys.notify, keys.pending_ids]
        script_keys += [keys.result(payload_id(payload) or "-") for _, _, payload in retries]
        script_keys += keys.levels
        args: list[KeyOrArg] = ["retry"]
        args += [part for triple in retries for part in triple]
        return int(self.queue.scripts.retry_failed(self.queue.client, script_keys, args))

    def forget(self, queue: str, member: bytes, record: bytes) -> bool:
        """Drop one record (found as ``retry`` finds it); False if it was gone already."""
        args = ("forget", member, record, b"")
        return int(self.queue.scripts.retry_failed(self.queue.client, self._keys(queue), args)) == 1

    def flush_oldest(self, queue: str, most: int) -> int:
        """Delete up to ``most`` of the oldest records (retry_failed.lua); how many went."""
        flush = ("flush", most)
        return int(self.queue.scripts.retry_failed(self.queue.client, self._keys(queue), flush))

    def _keys(self, queue: str) -> tuple[str, str]:
        keys = self.queue.keys(queue)
        return keys.failed, keys.failed_lookup
