"""The failed lists in Redis: reading, retrying, forgetting and flushing records as bytes.

:mod:`rqueue.failed` owns the record format and decides which records to act on; the
key names and the scripts stay here, so that module never learns where a queue's
failed list lives. A record is named by its exact bytes (``LREM`` matches them), which
is also what makes a retry or a forget of one record happen once.

A list may hold millions of records, so nothing here reads or changes a whole list in
one call: reads are windows (``LRANGE`` of a bounded range), counts are ``LLEN``s
pipelined a bounded number at a time, and a retry or flush of many records is one
script call per chunk the caller sizes. Redis runs one command at a time; a call that
touched a million records would stall every worker and producer while it ran.
"""

from __future__ import annotations

from collections.abc import Sequence

from rqueue.store.header import payload_id
from rqueue.store.queue import RedisQueue


class FailedStore:
    """The ``queues:<name>:failed`` lists of one Redis."""

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue

    def counts(self, queues: Sequence[str], per_call: int) -> list[int]:
        """How many records each of ``queues`` holds (``LLEN``s, ``per_call`` a round trip)."""
        found: list[int] = []
        for start in range(0, len(queues), per_call):
            pipe = self.queue.client.pipeline(transaction=False)
            for queue in queues[start : start + per_call]:
                pipe.llen(self.queue.keys(queue).failed)
            found += [int(n) for n in pipe.execute()]
        return found

    def window(self, queue: str, start: int, stop: int) -> list[bytes]:
        """Records ``start`` to ``stop`` (inclusive; from the oldest, negative from the
        newest, as ``LRANGE``) of ``queue``'s failed list, oldest first."""
        found: list[bytes] = self.queue.client.lrange(self.queue.keys(queue).failed, start, stop)  # type: ignore[assignment]
        return found

    def among_newest(self, queue: str, record: bytes, newest: int) -> bool:
        """True if ``record`` is one of the last ``newest`` of the list (LPOS from the end)."""
        failed = self.queue.keys(queue).failed
        return self.queue.client.lpos(failed, record, rank=-1, maxlen=newest) is not None  # type: ignore[arg-type]

    def ends(self, queue: str) -> tuple[bytes | None, bytes | None]:
        """The oldest and the newest record of ``queue``'s list (None for an empty list)."""
        pipe = self.queue.client.pipeline(transaction=False)
        failed = self.queue.keys(queue).failed
        pipe.lindex(failed, 0)
        pipe.lindex(failed, -1)
        oldest, newest = pipe.execute()
        return oldest, newest

    def retry(
        self, queue: str, retries: Sequence[tuple[bytes, bytes]], from_newest: bool = False
    ) -> int:
        """Take each ``(record, payload)``'s record off the list and push its payload,
        all in one step (retry_failed.lua); how many records were still there.

        Each record is looked for from the oldest end, or with ``from_newest`` the
        newest: ``LREM`` costs the records it passes before the one it removes.
        A record gone already was retried or forgotten by someone else: it pushes nothing.
        """
        if not retries:
            return 0
        keys = self.queue.keys(queue)
        script_keys = [keys.failed, keys.ready, keys.notify, keys.pending_ids]
        script_keys += [keys.result(payload_id(payload) or "-") for _, payload in retries]
        args = [-1 if from_newest else 1, *(part for pair in retries for part in pair)]
        return int(self.queue.scripts.retry_failed(self.queue.client, script_keys, args))

    def forget(self, queue: str, record: bytes, from_newest: bool = False) -> bool:
        """Drop one record, looked for from the end ``from_newest`` says (as ``retry``);
        False if it was gone already."""
        failed = self.queue.keys(queue).failed
        return bool(self.queue.client.lrem(failed, -1 if from_newest else 1, record))  # type: ignore[arg-type]

    def flush_oldest(self, queue: str, most: int) -> int:
        """Delete up to ``most`` of the oldest records (flush_failed.lua); how many went."""
        failed = (self.queue.keys(queue).failed,)
        return int(self.queue.scripts.flush_failed(self.queue.client, failed, (most,)))
