"""A queue's failed records in Redis: reading, retrying, forgetting and flushing them as bytes.

:mod:`rqueue.failed` owns the record format and decides which records to act on; the
key names and the scripts stay here, so that module never learns where a queue's
failed records live.

They live in two keys of the queue (as Laravel Horizon keeps its failed jobs): an index,
a sorted set of record key -> when it came (µs), which orders and pages them by rank
in O(log n), and a hash of record key -> record bytes. A record key is ``<task id>#<n>``
and one task's records fill n = 1, 2, ... without a gap (fail.lua, retry_failed.lua),
so the records of an id are found with a lookup or two, and one record is retried or
forgotten in O(log n) however many there are: the list this replaced made that an
``LREM`` walking half a million records of a million, with every worker and producer
waiting behind it. Nothing here reads or changes more than a bounded chunk in one call.

A queue's failed *list*, written by a version before the index, is converted into it a
chunk per call the first time its queue's records are counted (:meth:`FailedStore.counts`,
which every read starts with): the list is not lost, nor hidden from a listing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from rqueue.store.header import payload_id
from rqueue.store.queue import RedisQueue
from rqueue.store.wire import KeyOrArg


class Held(NamedTuple):
    """One record found by its id: its bytes and when it came (µs)."""

    record: bytes
    score: float


Identify = Callable[[bytes], tuple[str, float] | None]
"""A record's id and when it failed (Unix time), or None for bytes that are no record."""


_SANE_TIME = 4e9
"""Unix times from here on are not taken as a failure's time (and their microseconds
would no longer be exact in a zset score)."""


def record_key(task_id: str, n: int = 1) -> bytes:
    """Where the ``n``-th record of ``task_id`` is filed (fail.lua's ``<id>#<n>``)."""
    return f"{task_id}#{n}".encode("utf-8", "surrogateescape")


class FailedStore:
    """The failed records of the queues of one Redis."""

    def __init__(self, queue: RedisQueue, identify: Identify) -> None:
        self.queue = queue
        self.identify = identify

    def counts(self, queues: Sequence[str], per_call: int, step: int) -> list[int]:
        """How many records each of ``queues`` holds (``ZCARD``s, ``per_call`` a round
        trip), converting first the old failed list of any queue that has one (``step``
        records a script call)."""
        found: list[int] = []
        for start in range(0, len(queues), per_call):
            names = queues[start : start + per_call]
            pipe = self.queue.client.pipeline(transaction=False)
            for queue in names:
                keys = self.queue.keys(queue)
                pipe.zcard(keys.failed_index)
                pipe.type(keys.failed)
            replies = pipe.execute()
            for i, queue in enumerate(names):
                if replies[2 * i + 1] in (b"list", "list"):
                    self.convert(queue, step)  # a converter elsewhere may share it: count
                    replies[2 * i] = self.queue.client.zcard(self.queue.keys(queue).failed_index)
                found.append(int(replies[2 * i]))
        return found

    def convert(self, queue: str, step: int) -> int:
        """Move ``queue``'s old failed list into the index, ``step`` records a
        script call, oldest first (convert_failed.lua); how many this call moved.

        Safe to run anywhere at any time: from several processes at once each call
        moves the list's head at the time, and once the list is gone it does nothing.
        """
        keys = self.queue.keys(queue)
        script_keys = (keys.failed, keys.failed_index, keys.failed_records)
        moved = score = 0
        while head := self.queue.client.lrange(keys.failed, 0, step - 1):
            args, last = self._filed(head, score)  # type: ignore[arg-type]
            done = int(self.queue.scripts.convert_failed(self.queue.client, script_keys, args))
            if done > 0:  # -1: another converter moved this head first
                moved, score = moved + done, last
        return moved

    def _filed(self, records: Sequence[bytes], score: int) -> tuple[list[KeyOrArg], int]:
        """convert_failed.lua's arguments: each record, its id and its score (µs), the
        time it failed but always after the one before it, so the records keep the
        list's order (a record that does not decode, or says no sane time, comes just
        after the one before it, whose score is ``score``); and the last score."""
        args: list[KeyOrArg] = []
        for record in records:
            identity = self.identify(record)
            task_id = identity[0] if identity else ""
            score += 1
            if identity and math.isfinite(identity[1]) and 0 <= identity[1] < _SANE_TIME:
                score = max(score, int(identity[1] * 1_000_000))
            args += [record, task_id, score]
        return args, score

    def window(
        self, queue: str, first: int, last: int, newest_first: bool
    ) -> list[tuple[bytes, bytes]]:
        """``(key, record)`` of the records ranked ``first`` to ``last`` (inclusive,
        from the oldest or the newest), in that order, read in one step (read_failed.lua)."""
        order = "1" if newest_first else "0"
        found, records = self.queue.scripts.read_failed(
            self.queue.client, self._keys(queue), (first, last, order)
        )
        # The index and the hash change together, so each key has its record; one
        # deleted by hand from the hash alone is left out rather than shown as nothing.
        return [(key, record) for key, record in zip(found, records, strict=True) if record]

    def records_of(
        self, queues: Sequence[str], task_ids: Sequence[str], per_call: int
    ) -> list[Held]:
        """Every record of each of ``task_ids`` in each of ``queues``.

        A lookup of ``<id>#1`` in each queue, pipelined ``per_call`` a round trip, then of
        ``#2`` where that was there, and so on: an id's records fill 1 to m, so the
        first miss ends its search. Typically two lookups per queue and id.
        """
        found: list[Held] = []
        wanted = [(queue, task_id) for queue in queues for task_id in task_ids]
        n = 1
        while wanted:
            there = []
            for start in range(0, len(wanted), per_call):
                pipe = self.queue.client.pipeline(transaction=False)
                for queue, task_id in wanted[start : start + per_call]:
                    keys = self.queue.keys(queue)
                    pipe.hget(keys.failed_records, record_key(task_id, n))
                    pipe.zscore(keys.failed_index, record_key(task_id, n))
                replies = pipe.execute()
                for i, (queue, task_id) in enumerate(wanted[start : start + per_call]):
                    record, score = replies[2 * i], replies[2 * i + 1]
                    if record is not None:
                        found.append(Held(record, score or 0.0))
                        there.append((queue, task_id))
            wanted, n = there, n + 1
        return found

    def retry(self, queue: str, retries: Sequence[tuple[bytes, bytes, bytes]]) -> int:
        """Take each ``(key, record, payload)``'s record off the index and push its
        payload, all in one step (retry_failed.lua); how many records were still there.

        ``key`` is where the record was read (or :func:`record_key` of its id): the
        script finds it there or among its id's other records by its exact bytes. A
        record gone already was retried or forgotten by someone else: it pushes nothing.
        """
        if not retries:
            return 0
        keys = self.queue.keys(queue)
        script_keys = [*self._keys(queue), keys.ready, keys.notify, keys.pending_ids]
        script_keys += [keys.result(payload_id(payload) or "-") for _, _, payload in retries]
        args: list[KeyOrArg] = ["retry"]
        args += [part for triple in retries for part in triple]
        return int(self.queue.scripts.retry_failed(self.queue.client, script_keys, args))

    def forget(self, queue: str, key: bytes, record: bytes) -> bool:
        """Drop one record (found as ``retry`` finds it); False if it was gone already."""
        args = ("forget", key, record, b"")
        return int(self.queue.scripts.retry_failed(self.queue.client, self._keys(queue), args)) == 1

    def flush_oldest(self, queue: str, most: int) -> int:
        """Delete up to ``most`` of the oldest records (retry_failed.lua); how many went."""
        flush = ("flush", most)
        return int(self.queue.scripts.retry_failed(self.queue.client, self._keys(queue), flush))

    def _keys(self, queue: str) -> tuple[str, str]:
        keys = self.queue.keys(queue)
        return keys.failed_index, keys.failed_records
