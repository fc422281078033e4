"""Failed tasks: the record a worker writes, and listing, retrying and forgetting them.

A record embeds the task's payload bytes unchanged, so a retry pushes exactly what
was dispatched (with its attempts reset) and works even for bytes that never decoded.

A queue may hold millions of failed records, and Redis runs one command at a time, so
every operation here costs Redis a bounded amount per call: a page reads only its
window, a record is found by its id in O(log n) and retried or forgotten with a walk
from the nearer end of the list (:mod:`rqueue.store.failed_store` says how), and
``retry --all`` and ``flush`` move or delete one step of :data:`STEP` records per
script call, each call a complete step, so an interrupted run loses nothing and can
simply be run again.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgpack

from rqueue.encoding.payload import Job, new_id, readable
from rqueue.encoding.sealing import Keyring
from rqueue.errors import InvalidPayload, InvalidQueueName
from rqueue.store.failed_store import FailedStore, record_key
from rqueue.store.header import payload_id, with_attempts
from rqueue.store.queue import RedisQueue

CHUNK = 250
"""The most records one Redis call reads, and the most queues (or ids) one pipeline
looks up: a window of 250 records is about 100 KB, a fraction of a millisecond."""
STEP = 100
"""The most records one script call retries or deletes: each costs Redis a few
microseconds (a lookup, a mark in the list near its end, the check that keeps its id's
records whole), so a call takes about a millisecond (docs/benchmarks.md, "Failed tasks
and queue sizes at scale")."""
PAGE = 50
"""How many records a page of ``rqueue failed list`` shows unless ``--limit`` says."""
MOST_SCANNED = 100_000
"""Records a search by what they hold (tags, text) reads at most, newest first: about
40 MB from Redis, a few seconds."""


@dataclass(frozen=True)
class FailedTask:
    """One failed record of a queue (an element of its list ``queues:<name>:failed``)."""

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

    def job(self, keyring: Keyring | None = None) -> Job | None:
        """Its decoded payload (None if it does not decode), an encrypted call's
        arguments decrypted with ``keyring`` if they can be, else ``sealed``."""
        try:
            return readable(self.payload, keyring)
        except InvalidPayload:
            return None

    def tags(self) -> tuple[str, ...]:
        """The tags of its call (``@task(tags=...)``); none if its payload does not decode."""
        job = self.job()
        return job.tags if job is not None else ()


def make_record(
    queue: str,
    payload: bytes,
    exception: str,
    message: str,
    traceback: str = "",
    job: Job | None = None,
    timed_out: bool = False,
) -> bytes:
    """Encode the failure of ``payload``; ``job`` is its decoded form if it decoded.

    The id comes first: fail.lua reads it from the head of the record to file it.
    """
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


_LARGEST_COUNT = 2**32 - 1
"""Attempts and pids a record may say: what the payload's counter (uint32) can hold."""
_LATEST_TIME = 2**32 - 1
"""The latest failure time a record may say (Unix seconds, in 2106): past it, or NaN,
it is no time a worker wrote."""
_TEXT_FIELDS = ("task", "exception", "message", "traceback", "host")


def decode_record(raw: bytes) -> FailedTask:
    """A record read from Redis, every field checked for its type and bounds: anything
    there may have been written by hand, and a retry pushes the ``payload`` it names
    (an integer there once became ``bytes(n)``, n zero bytes). Raises InvalidPayload,
    naming the field, for a record that is not one make_record could have written."""
    try:
        fields = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except Exception as exc:
        raise InvalidPayload(f"unreadable failed record: {exc!r}") from None
    if not isinstance(fields, dict):
        raise InvalidPayload("unreadable failed record: not a msgpack map")
    text = {name: _field(fields, name, str, "") for name in _TEXT_FIELDS}
    failed_at = _field(fields, "failed_at", (int, float), 0.0)
    attempts = _field(fields, "attempts", int, 0)
    pid = _field(fields, "pid", int, 0)
    if not (math.isfinite(failed_at) and 0 <= failed_at < _LATEST_TIME):
        raise InvalidPayload(f"unreadable failed record: failed_at {failed_at!r} is no time")
    for name, count in (("attempts", attempts), ("pid", pid)):
        if not 0 <= count <= _LARGEST_COUNT:
            raise InvalidPayload(f"unreadable failed record: {name} {count!r} out of range")
    return FailedTask(
        id=_field(fields, "id", str),
        queue=_field(fields, "queue", str),
        failed_at=float(failed_at),
        attempts=attempts,
        pid=pid,
        timed_out=_field(fields, "timed_out", bool, False),
        payload=_field(fields, "payload", bytes),
        raw=raw,
        **text,
    )


def _field(fields: dict[Any, Any], name: str, kind: Any, default: Any = None) -> Any:
    """``fields[name]`` if it is of ``kind`` (``default`` if missing, when there is one)."""
    value = fields.get(name, default)
    if value is None or not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidPayload(f"unreadable failed record: field {name!r} is {value!r:.60}")
    return value


class FailedPage(NamedTuple):
    """One window of the failed records, newest first (:meth:`FailedTasks.page`)."""

    records: list[FailedTask]
    total: int
    """How many records the queues held when counted, readable or not."""
    offset: int
    end: int
    """The offset just past this window: the next page starts there."""
    unreadable: int
    """Records in the window that are not failed records (written by hand): skipped."""


class Matches(NamedTuple):
    """A page of the failed records that match (:meth:`FailedTasks.matching`)."""

    records: list[FailedTask]
    next_offset: int | None
    """Where the next page of matches starts (None: no more, or the scan stopped)."""
    scanned_out: bool
    """The scan stopped after its most records without reaching the end."""


class Step(NamedTuple):
    """One chunk of a ``retry --all`` or ``flush``: one script call on one queue."""

    queue: str
    done: int
    """Records retried (or deleted) by this call."""
    seen: int
    """Of the records the queue held when the run began, how many are behind us now."""
    held: int


class FailedTasks:
    """Operations on the failed records of every known queue (or of the ones named).

    Over several queues the order is queue by queue (in the order given; known queues
    by name), ``list`` aside: a window is then found from the queues' counts alone,
    without reading a record outside it.
    """

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue
        self.store = FailedStore(queue)

    def page(
        self, queues: Iterable[str] | None = None, offset: int = 0, limit: int = PAGE
    ) -> FailedPage:
        """Records ``offset`` to ``offset + limit``, counting from the newest of each queue.

        Reads the queues' counts and that window only. Offsets count from the newest,
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

    def matching(
        self,
        keep: Callable[[FailedTask], bool],
        queues: Iterable[str] | None = None,
        offset: int = 0,
        limit: int = PAGE,
        most_scanned: int = MOST_SCANNED,
    ) -> Matches:
        """A page of the records ``keep`` is true of, newest first, ``offset`` counting
        matches: a scan a window at a time (a filter on what a record holds, its tags,
        its text, has no index), which stops after ``most_scanned`` records."""
        records: list[FailedTask] = []
        skipped = 0
        for scanned, record in enumerate(self.iterate(queues), 1):
            if scanned > most_scanned:
                return Matches(records, None, True)
            if not keep(record):
                continue
            if skipped < offset:
                skipped += 1
            elif len(records) < limit:
                records.append(record)
            else:
                return Matches(records, offset + limit, False)
        return Matches(records, None, False)

    def list(self, queues: Iterable[str] | None = None) -> list[FailedTask]:
        """Every readable record, oldest first, all in memory: for lists of a few;
        :meth:`page` and :meth:`iterate` read a window at a time."""
        return sorted(self.iterate(queues), key=lambda f: f.failed_at)

    def holds(self, failed: FailedTask) -> bool:
        """True if ``failed``'s exact record is in its queue's failed list: how a worker
        checks a claim that a task failed (``parent_failures.py``), by its id."""
        try:
            [found] = self.store.records_of([failed.queue], [failed.id], CHUNK)
        except InvalidQueueName:  # a record written by hand, naming no queue there can be
            return False
        return any(held.record == failed.raw for held in found)

    def find(self, task_id: str) -> FailedTask | None:
        return self.find_all([task_id]).get(task_id)

    def find_all(
        self, task_ids: Iterable[str], queues: Iterable[str] | None = None
    ) -> dict[str, FailedTask]:
        """The newest record of each of ``task_ids`` that has one (in ``queues``, or
        every known queue that has failed records), by its id: a lookup or two per id
        and queue, pipelined, whatever the number of records."""
        names = [name for name, _ in self._counted(queues)]
        wanted = list(dict.fromkeys(task_ids))
        asked = set(wanted)
        newest: dict[str, FailedTask] = {}
        for found in self.store.records_of(names, wanted, CHUNK):
            for held in found:  # an id's records in a queue come oldest first
                try:
                    failed = decode_record(held.record)
                except InvalidPayload:
                    continue
                if failed.id not in asked:  # an element put in the list by hand
                    continue
                known = newest.get(failed.id)
                if known is None or failed.failed_at >= known.failed_at:
                    newest[failed.id] = failed
        return newest

    def retry(self, failed: FailedTask) -> bool:
        """Push the task back with attempts reset; False if someone retried it already."""
        return self.retry_many([failed]) == 1

    def retry_many(self, records: Iterable[FailedTask]) -> int:
        """Push each task back with attempts reset, :data:`STEP` a script call per
        queue; how many were still there to retry."""
        by_queue: dict[str, list[tuple[bytes, bytes, bytes]]] = {}
        for failed in records:
            retry = (record_key(failed.id), failed.raw, with_attempts(failed.payload, 0))
            by_queue.setdefault(failed.queue, []).append(retry)
        return sum(
            self.store.retry(name, retries[start : start + STEP])
            for name, retries in by_queue.items()
            for start in range(0, len(retries), STEP)
        )

    def retry_all(self, queues: Iterable[str] | None = None) -> int:
        return sum(step.done for step in self.retry_chunks(queues))

    def retry_chunks(self, queues: Iterable[str] | None = None) -> Iterator[Step]:
        """Retry every record the queues hold now, oldest first, :data:`STEP` per script
        call, yielding after each call. Tasks that fail again meanwhile are newer than
        all of them and are not retried twice: each queue is worked through only as far
        as it reached when the run began.

        A record that does not decode, or names another queue than the one it is in
        (written by hand), stays where it is, and the next window starts after it.
        """
        for name, held in self._counted(queues):
            position = seen = 0
            while seen < held:
                size = min(STEP, held - seen)
                window = self.store.window(name, position, position + size - 1, False)
                if not window:
                    break
                seen += len(window)
                retries = []
                for key, raw in window:
                    try:
                        failed = decode_record(raw)
                    except InvalidPayload:
                        failed = None
                    if failed is None or failed.queue != name:
                        position += 1
                        continue
                    retries.append((key, raw, with_attempts(failed.payload, 0)))
                yield Step(name, self.store.retry(name, retries), seen, held)

    def forget(self, failed: FailedTask) -> bool:
        """Drop one record; False if someone retried or forgot it already."""
        return self.store.forget(failed.queue, record_key(failed.id), failed.raw)

    def forget_many(self, records: Iterable[FailedTask]) -> int:
        """Drop each record (one script call each: forgetting is never bulk work in a
        hot loop); how many were still there. :meth:`retry_many`'s counterpart."""
        return sum(self.forget(failed) for failed in records)

    def flush(self, queues: Iterable[str] | None = None) -> int:
        return sum(step.done for step in self.flush_chunks(queues))

    def flush_chunks(self, queues: Iterable[str] | None = None) -> Iterator[Step]:
        """Delete every record the queues hold now, oldest first, :data:`STEP` per
        call, yielding after each; records that arrive meanwhile stay."""
        for name, held in self._counted(queues):
            seen = 0
            while seen < held:
                done = self.store.flush_oldest(name, min(STEP, held - seen))
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

        Positions are ranks from the newest of each queue, as the counts in ``counted``
        were when read: a failure recorded during the scan shifts the rest by one, so
        one record may come twice.
        """
        for name, count in counted:
            if offset >= count:
                offset -= count
                continue
            first, offset = offset, 0
            while first < count and limit != 0:
                last = min(count, first + min(CHUNK, limit or CHUNK)) - 1
                window = self.store.window(name, first, last, True)
                if limit is not None:
                    limit -= len(window)
                for _, raw in window:
                    yield name, raw
                first = last + 1
            if limit == 0:
                return
