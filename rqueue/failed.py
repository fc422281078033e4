"""Failed tasks: the record a worker writes, and listing, retrying and forgetting them.

A record embeds the task's payload bytes unchanged, so a retry pushes exactly what
was dispatched (with its attempts reset) and works even for bytes that never decoded.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass

import msgpack

from rqueue.errors import InvalidPayload, InvalidQueueName
from rqueue.payload import Job, decode, new_id
from rqueue.store.failed_store import FailedStore
from rqueue.store.header import payload_id, with_attempts
from rqueue.store.queue import RedisQueue

RECENT = 10_000
"""How far back from the newest record :meth:`FailedTasks.holds` looks."""


@dataclass(frozen=True)
class FailedTask:
    """One entry of a ``queues:<name>:failed`` list."""

    id: str
    queue: str
    task: str
    exception: str
    message: str
    traceback: str
    failed_at: float
    attempts: int
    host: str
    pid: int
    timed_out: bool
    payload: bytes
    raw: bytes

    def job(self) -> Job | None:
        try:
            return decode(self.payload)
        except InvalidPayload:
            return None


def make_record(
    queue: str,
    payload: bytes,
    exception: str,
    message: str,
    traceback: str = "",
    job: Job | None = None,
    timed_out: bool = False,
) -> bytes:
    """Encode the failure of ``payload``; ``job`` is its decoded form if it decoded."""
    record = {
        "id": job.id if job else payload_id(payload) or new_id(),
        "queue": queue,
        "task": job.task if job else "",
        "exception": exception,
        "message": message,
        "traceback": traceback,
        "failed_at": time.time(),
        "attempts": job.attempts if job else 0,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "timed_out": timed_out,
        "payload": payload,
    }
    return msgpack.packb(record, use_bin_type=True)  # type: ignore[no-any-return]


def decode_record(raw: bytes) -> FailedTask:
    try:
        fields = msgpack.unpackb(raw, raw=False)
        return FailedTask(
            id=str(fields["id"]),
            queue=str(fields["queue"]),
            task=str(fields.get("task", "")),
            exception=str(fields.get("exception", "")),
            message=str(fields.get("message", "")),
            traceback=str(fields.get("traceback", "")),
            failed_at=float(fields.get("failed_at", 0.0)),
            attempts=int(fields.get("attempts", 0)),
            host=str(fields.get("host", "")),
            pid=int(fields.get("pid", 0)),
            timed_out=bool(fields.get("timed_out", False)),
            payload=bytes(fields["payload"]),
            raw=raw,
        )
    except Exception as exc:
        raise InvalidPayload(f"unreadable failed record: {exc!r}") from None


class FailedTasks:
    """Operations on the failed lists of every known queue."""

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue
        self.store = FailedStore(queue)

    def list(self, queues: Iterable[str] | None = None) -> list[FailedTask]:
        names = list(queues) if queues else self.queue.known_queues()
        found: list[FailedTask] = []
        for name in names:
            for raw in self.store.records(name):
                try:
                    found.append(decode_record(raw))
                except InvalidPayload:
                    continue
        return sorted(found, key=lambda f: f.failed_at)

    def holds(self, failed: FailedTask) -> bool:
        """True if ``failed``'s exact record is among the newest ``RECENT`` of its queue.

        How a worker checks a claim that a task failed (``parent_failures.py``) without
        reading the whole list: a parent's record is one of the newest when it asks.
        """
        try:
            return self.store.among_newest(failed.queue, failed.raw, RECENT)
        except InvalidQueueName:  # a record written by hand, naming no queue there can be
            return False

    def find(self, task_id: str) -> FailedTask | None:
        return next((f for f in self.list() if f.id == task_id), None)

    def retry(self, failed: FailedTask) -> bool:
        """Push the task back with attempts reset; False if someone retried it already."""
        return self.store.retry(failed.queue, failed.raw, with_attempts(failed.payload, 0))

    def retry_all(self, queues: Iterable[str] | None = None) -> int:
        return sum(self.retry(f) for f in self.list(queues))

    def forget(self, failed: FailedTask) -> bool:
        return self.store.forget(failed.queue, failed.raw)

    def flush(self, queues: Iterable[str] | None = None) -> int:
        return self.store.flush(list(queues) if queues else self.queue.known_queues())
