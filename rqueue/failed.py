"""Failed tasks: the record a worker writes, and listing, retrying and forgetting them.

A record embeds the task's payload bytes unchanged, so a retry pushes exactly what
was dispatched (with its attempts reset) and works even for bytes that never decoded.

A failed list may hold millions of records, and Redis runs one command at a time, so
every operation here works a chunk at a time (:data:`CHUNK` records per Redis call):
a page reads only its window, a search by id scans newest first in windows, and
``retry --all`` and ``flush`` move or delete one chunk per script call, each call a
complete step, so an interrupted run loses nothing and can simply be run again.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import msgpack

from rqueue.errors import InvalidPayload, InvalidQueueName
from rqueue.payload import Job, decode, new_id
from rqueue.store.failed_store import FailedStore
from rqueue.store.header import payload_id, with_attempts
from rqueue.store.queue import RedisQueue

CHUNK = 250
"""The most records one Redis call reads, retries or deletes, and the most queues one
pipeline counts: a window of 250 records is about 100 KB, and a retry of 250 runs an
``LREM`` and a ``PTTL`` each in its script; either costs Redis a millisecond or two
(docs/benchmarks.md, "Failed tasks and queue sizes at scale")."""
PAGE = 50
"""How many records a page of ``rqueue failed list`` shows unless ``--limit`` says."""
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


class FailedPage(NamedTuple):
    """One window of the failed lists, newest first (:meth:`FailedTasks.page`)."""

    records: list[FailedTask]
    total: int
    """How many records the lists held when counted, readable or not."""
    offset: int
    end: int
    """The offset just past this window: the next page starts there."""
    unreadable: int
    """Records in the window that are not failed records (written by hand): skipped."""


class Step(NamedTuple):
    """One chunk of a ``retry --all`` or ``flush``: one script call on one queue."""

    queue: str
    done: int
    """Records retried (or deleted) by this call."""
    seen: int
    """Of the records the queue held when the run began, how many are behind us now."""
    held: int


class FailedTasks:
    """Operations on the failed lists of every known queue (or of the ones named).

    Over several queues the order is queue by queue (in the order given; known queues
    by name), ``list`` aside: a window is then found from the lists' lengths alone,
    without reading a record outside it.
    """

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue
        self.store = FailedStore(queue)

    def page(
        self, queues: Iterable[str] | None = None, offset: int = 0, limit: int = PAGE
    ) -> FailedPage:
        """Records ``offset`` to ``offset + limit``, counting from the newest of each queue.

        Reads the lists' lengths and that window only. Offsets count from the newest,
        so a failure recorded between two pages shifts the next one by one.
        """
        counted = self._counted(queues)
        records: list[FailedTask] = []
        unreadable = 0
        for _, raw in self._newest_first(counted, offset, limit):
            try:
                records.append(decode_record(raw))
            except InvalidPayload:
                unreadable += 1
        total = sum(count for _, count in counted)
        return FailedPage(records, total, offset, offset + len(records) + unreadable, unreadable)

    def iterate(self, queues: Iterable[str] | None = None) -> Iterator[FailedTask]:
        """Every readable record, newest first, read a window of :data:`CHUNK` at a time."""
        for _, raw in self._newest_first(self._counted(queues), 0, None):
            try:
                yield decode_record(raw)
            except InvalidPayload:
                continue

    def list(self, queues: Iterable[str] | None = None) -> list[FailedTask]:
        """Every readable record, oldest first, all in memory: for lists of a few;
        :meth:`page` and :meth:`iterate` read a window at a time."""
        return sorted(self.iterate(queues), key=lambda f: f.failed_at)

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
        return self.find_all([task_id]).get(task_id)

    def find_all(
        self, task_ids: Iterable[str], queues: Iterable[str] | None = None
    ) -> dict[str, FailedTask]:
        """The newest record of each of ``task_ids`` found, by id, in one scan newest
        first (of ``queues``, or every known queue) that stops once all are found.

        A record is decoded only if its bytes contain one of the ids: a scan costs one
        ``LRANGE`` per :data:`CHUNK` records, and a substring test per record.
        """
        wanted = {task_id.encode("utf-8", "replace"): task_id for task_id in task_ids}
        found: dict[str, FailedTask] = {}
        for _, raw in self._newest_first(self._counted(queues), 0, None):
            if len(found) == len(wanted):
                break
            if not any(needle in raw for needle in wanted):
                continue
            try:
                failed = decode_record(raw)
            except InvalidPayload:
                continue
            if failed.id in wanted.values():
                found.setdefault(failed.id, failed)
        return found

    def retry(self, failed: FailedTask) -> bool:
        """Push the task back with attempts reset; False if someone retried it already."""
        retry = (failed.raw, with_attempts(failed.payload, 0))
        return self.store.retry(failed.queue, [retry], self._nearer_newest(failed)) == 1

    def retry_all(self, queues: Iterable[str] | None = None) -> int:
        return sum(step.done for step in self.retry_chunks(queues))

    def retry_chunks(self, queues: Iterable[str] | None = None) -> Iterator[Step]:
        """Retry every record the lists hold now, oldest first, :data:`CHUNK` per script
        call, yielding after each call. Tasks that fail again meanwhile join the end of
        the list and are not retried twice: each list is worked through only as far as
        it reached when the run began.

        A record that does not decode, or names another queue than the list it is in
        (written by hand), stays where it is, and the next window starts after it.
        """
        for name, held in self._counted(queues):
            position = seen = 0
            while seen < held:
                size = min(CHUNK, held - seen)
                window = self.store.window(name, position, position + size - 1)
                if not window:
                    break
                seen += len(window)
                retries = []
                for raw in window:
                    try:
                        failed = decode_record(raw)
                    except InvalidPayload:
                        failed = None
                    if failed is None or failed.queue != name:
                        position += 1
                        continue
                    retries.append((raw, with_attempts(failed.payload, 0)))
                yield Step(name, self.store.retry(name, retries), seen, held)

    def forget(self, failed: FailedTask) -> bool:
        return self.store.forget(failed.queue, failed.raw, self._nearer_newest(failed))

    def _nearer_newest(self, failed: FailedTask) -> bool:
        """Whether ``failed`` is likelier nearer the newest end of its list than the
        oldest, judged by its time beside theirs: removing one record from a list costs
        Redis the records it passes on the way (about 85 ns each), so a recent failure
        is looked for from the newest end. Records stay in the order they failed in."""
        oldest, newest = self.store.ends(failed.queue)
        try:
            first = decode_record(oldest).failed_at if oldest else 0.0
            last = decode_record(newest).failed_at if newest else 0.0
        except InvalidPayload:  # an end written by hand: no better guess than the head
            return False
        return last - failed.failed_at < failed.failed_at - first

    def flush(self, queues: Iterable[str] | None = None) -> int:
        return sum(step.done for step in self.flush_chunks(queues))

    def flush_chunks(self, queues: Iterable[str] | None = None) -> Iterator[Step]:
        """Delete every record the lists hold now, oldest first, :data:`CHUNK` per
        call, yielding after each; records that arrive meanwhile stay."""
        for name, held in self._counted(queues):
            seen = 0
            while seen < held:
                done = self.store.flush_oldest(name, min(CHUNK, held - seen))
                if done == 0:  # emptied meanwhile, by a retry or another flush
                    break
                seen += done
                yield Step(name, done, seen, held)

    def _counted(self, queues: Iterable[str] | None) -> Sequence[tuple[str, int]]:
        """``(queue, records)`` of each of ``queues`` (default: every known one) that
        has failed records, in the order given (known queues: by name)."""
        names = list(queues) if queues else self.queue.known_queues()
        counts = self.store.counts(names, CHUNK)
        return [(name, count) for name, count in zip(names, counts, strict=True) if count]

    def _newest_first(
        self, counted: Sequence[tuple[str, int]], offset: int, limit: int | None
    ) -> Iterator[tuple[str, bytes]]:
        """``(queue, record)`` newest first, queue by queue, from ``offset`` on across
        them all, at most ``limit`` (None: all), read :data:`CHUNK` at a time.

        Positions count from the end of each list, as the lengths in ``counted`` were
        when read; a window is asked for by its index from the nearer end (``LRANGE``
        walks the list from the end an index counts from: on a million records that
        walk, not the window, is most of the call). A record pushed during the scan
        may then shift the newer half by one, so one record may come twice.
        """
        for name, count in counted:
            if offset >= count:
                offset -= count
                continue
            first, offset = offset, 0
            while first < count and limit != 0:
                last = min(count, first + min(CHUNK, limit or CHUNK)) - 1
                if first < count // 2:
                    window = self.store.window(name, -(last + 1), -(first + 1))
                else:  # Redis walks to a window from the end its index counts from
                    window = self.store.window(name, count - 1 - last, count - 1 - first)
                if limit is not None:
                    limit -= len(window)
                for raw in reversed(window):
                    yield name, raw
                first = last + 1
            if limit == 0:
                return
