"""The failed lists in Redis: reading, retrying, forgetting and flushing records as bytes.

:mod:`rqueue.failed` owns the record format and decides which records to act on; the
key names and the retry script stay here, so that module never learns where a queue's
failed list lives. A record is named by its exact bytes (``LREM`` matches them), which
is also what makes a retry or a forget of one record happen once.
"""

from __future__ import annotations

from collections.abc import Sequence

from rqueue.store.header import payload_id
from rqueue.store.queue import RedisQueue


class FailedStore:
    """The ``queues:<name>:failed`` lists of one Redis."""

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue

    def records(self, queue: str) -> list[bytes]:
        """Every record of ``queue``'s failed list, oldest failure first."""
        found: list[bytes] = self.queue.client.lrange(self.queue.keys(queue).failed, 0, -1)  # type: ignore[assignment]
        return found

    def among_newest(self, queue: str, record: bytes, newest: int) -> bool:
        """True if ``record`` is one of the last ``newest`` of the list (LPOS from the end)."""
        failed = self.queue.keys(queue).failed
        return self.queue.client.lpos(failed, record, rank=-1, maxlen=newest) is not None  # type: ignore[arg-type]

    def retry(self, queue: str, record: bytes, payload: bytes) -> bool:
        """Take ``record`` off the list and push ``payload`` in one step (retry_failed.lua).

        False if the record was gone already: someone else retried or forgot it.
        """
        keys = self.queue.keys(queue)
        result = keys.result(payload_id(payload) or "-")
        script_keys = (keys.failed, keys.ready, keys.notify, keys.pending_ids, result)
        return bool(
            self.queue.scripts.retry_failed(self.queue.client, script_keys, (record, payload))
        )

    def forget(self, queue: str, record: bytes) -> bool:
        """Drop one record; False if it was gone already."""
        return bool(self.queue.client.lrem(self.queue.keys(queue).failed, 1, record))  # type: ignore[arg-type]

    def flush(self, queues: Sequence[str]) -> int:
        """Empty the failed lists of ``queues`` in one round trip; how many records went."""
        pipe = self.queue.client.pipeline(transaction=False)
        for queue in queues:
            failed = self.queue.keys(queue).failed
            pipe.llen(failed)
            pipe.delete(failed)
        results = pipe.execute()
        return sum(int(n) for n in results[0::2])
