"""The worker registry: each running ``rqueue work`` says who it is and what it runs.

A worker's parent writes one entry (a msgpack map under ``GlobalKeys.worker(id)``)
every heartbeat, with a time to live a few heartbeats long, and lists its id in
``GlobalKeys.workers``. A worker that stops deletes its entry; one that dies (SIGKILL,
a lost host) stops renewing it and Redis expires it, so a listing never shows a dead
worker for longer than :data:`ENTRY_TTL`. Redis's expiry is the judge, not anyone's
clock: hosts whose clocks disagree still agree on which entries are alive.

What a child runs comes from the parent's scoreboard: each task's id, queue and name,
which the child writes there as the task starts (no Redis call), so a task is named
from the first beat that sees it, and dated from it too. A name too long for the
scoreboard is looked up instead, once the task has run on two beats in a row (so
only tasks running a second or more cost that, one read of the queue's reserved
set).

All keys here are global: never in one pipeline or script with a queue's keys.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgpack
import redis

from rqueue.encoding.payload import new_id, task_name
from rqueue.store.header import payload_id
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS

log = logging.getLogger("rqueue.worker")

HEARTBEAT = 1.0
"""Seconds between a parent's heartbeats (at most one per tick of its loop)."""
ENTRY_TTL = 10.0
"""Seconds an entry outlives its last heartbeat: a dead worker vanishes within this."""
_STALE_IDS_MS = 3600 * 1000
"""An id left in the workers set this long after its entry's last beat is dropped by
the next heartbeat of any worker (its entry expired long ago)."""
_NAME_LOOKUP_LIMIT = 1000
"""Most reservations read to name a queue's running tasks (their ids are the key)."""
_MAX_WORKERS = 10_000


class Running(NamedTuple):
    """A task a child runs now, as the parent's scoreboard shows it."""

    child: int
    task_id: str
    queue: str
    name: str | None = None
    """Its task's name, if the scoreboard had it (see the module doc)."""


@dataclass(frozen=True)
class RunningTask:
    """A task running now on a registered worker."""

    id: str
    task: str | None
    """Its name; None until it has run for a heartbeat or two (see the module doc)."""
    queue: str
    child: int
    started: float
    """Epoch seconds the parent first saw it running (to within a heartbeat)."""


@dataclass(frozen=True)
class WorkerInfo:
    """One registered worker, as read back (and checked) from its entry."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    processes: int
    """Children (``--concurrency``)."""
    slots: int
    """``async def`` tasks each child may run at once."""
    threads: int
    """Threads per child for sync tasks (0: process mode)."""
    started: float
    heartbeat: float
    """Epoch seconds of its last heartbeat, on its own clock."""
    tasks: tuple[RunningTask, ...]


@dataclass
class _Seen:
    """A task the heartbeat saw running: where, since when, and on how many beats."""

    child: int
    queue: str
    since: float
    name: str | None = None
    beats: int = 0


class Heartbeat:
    """The registry entry of one worker parent: renewed by :meth:`beat`, removed by
    :meth:`leave`."""

    def __init__(
        self,
        queue: RedisQueue,
        queues: Sequence[str],
        processes: int,
        slots: int,
        threads: int,
    ) -> None:
        self.queue = queue
        self.id = new_id()
        self._key = queue.global_keys.worker(self.id)
        self._static = {
            "id": self.id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": list(queues),
            "processes": processes,
            "slots": slots,
            "threads": threads,
            "started": time.time(),
        }
        self._due = 0.0
        self._seen: dict[str, _Seen] = {}
        """The tasks running at the last beat, by id."""
        self._warned = False

    def resized(self, processes: int) -> None:
        """The parent now keeps ``processes`` children (``rqueue supervise`` scaled it)."""
        self._static["processes"] = processes

    def beat(self, running: Callable[[], Sequence[Running]]) -> None:
        """Write the entry if a heartbeat is due, with what ``running()`` says the
        children run (read only then). Redis being away is the caller's to ride out; a
        key of the wrong type (someone wrote there) is logged once."""
        now = time.monotonic()
        if now < self._due:
            return
        self._due = now + HEARTBEAT
        tasks = self._track(running())
        entry = {**self._static, "heartbeat": time.time(), "tasks": tasks}
        registry = self.queue.global_keys.workers
        pipe = self.queue.client.pipeline(transaction=False)
        pipe.set(self._key, msgpack.packb(entry), px=round(ENTRY_TTL * 1000))
        pipe.zadd(registry, {self.id: round(time.time() * 1000)})
        pipe.zremrangebyscore(registry, "-inf", round(time.time() * 1000) - _STALE_IDS_MS)
        for reply in pipe.execute(raise_on_error=False):
            if isinstance(reply, REDIS_ERRORS):
                raise reply
            if isinstance(reply, redis.ResponseError) and not self._warned:
                self._warned = True
                log.error("worker registry: Redis refused the heartbeat: %s", reply)

    def leave(self) -> None:
        """Remove the entry now (a worker that stops); best effort."""
        pipe = self.queue.client.pipeline(transaction=False)
        pipe.delete(self._key)
        pipe.zrem(self.queue.global_keys.workers, self.id)
        try:
            pipe.execute()
        except (*REDIS_ERRORS, redis.ResponseError):
            pass  # it expires on its own

    def _track(self, running: Sequence[Running]) -> list[list[Any]]:
        """The running tasks as entry rows, naming those seen on an earlier beat too."""
        seen, now = {}, time.time()
        for task in running:
            known = self._seen.get(task.task_id)
            if known is None or known.queue != task.queue:
                known = _Seen(task.child, task.queue, now, task.name)
            else:
                known.child = task.child
                known.name = known.name or task.name
            known.beats += 1
            seen[task.task_id] = known
        self._seen = seen
        unnamed: dict[str, list[str]] = {}
        for task_id, known in seen.items():
            if known.name is None and known.beats == 2:
                unnamed.setdefault(known.queue, []).append(task_id)
        if unnamed:
            for task_id, name in self._names(unnamed).items():
                seen[task_id].name = name
        return [[i, s.name, s.queue, s.child, s.since] for i, s in seen.items()]

    def _names(self, ids_by_queue: dict[str, list[str]]) -> dict[str, str]:
        """Task names of reserved tasks, by id, read from the queues' reserved sets."""
        pipe = self.queue.client.pipeline(transaction=False)
        queues = list(ids_by_queue)
        for queue in queues:
            pipe.zrange(self.queue.keys(queue).reserved, 0, _NAME_LOOKUP_LIMIT - 1)
        names: dict[str, str] = {}
        for queue, members in zip(queues, pipe.execute(raise_on_error=False), strict=True):
            if not isinstance(members, list):
                continue
            wanted = set(ids_by_queue[queue])
            for member in members:
                task_id = payload_id(member)
                name = task_name(member) if task_id in wanted else None
                if task_id is not None and name is not None:
                    names[task_id] = name
        return names


def list_workers(queue: RedisQueue) -> list[WorkerInfo]:
    """Every worker whose entry has not expired, by start time. Entries are hostile
    data: one that does not read as a worker is left out; ids of expired entries are
    dropped from the set."""
    registry = queue.global_keys.workers
    members: list[Any] = queue.client.zrange(registry, 0, _MAX_WORKERS - 1)
    ids = [m.decode("ascii", "replace") for m in members if isinstance(m, bytes)]
    if not ids:
        return []
    pipe = queue.client.pipeline(transaction=False)
    for worker_id in ids:
        pipe.get(queue.global_keys.worker(worker_id))
    entries = pipe.execute(raise_on_error=False)
    gone = [worker_id for worker_id, entry in zip(ids, entries, strict=True) if entry is None]
    if gone:
        queue.client.zrem(registry, *gone)
    workers = [_worker(entry) for entry in entries if isinstance(entry, bytes)]
    return sorted((w for w in workers if w is not None), key=lambda w: (w.started, w.id))


def served_queues(queue: RedisQueue) -> set[str]:
    """The queues some running worker takes tasks from (and fires the schedules of,
    unless started with ``--no-schedule``)."""
    return {name for worker in list_workers(queue) for name in worker.queues}


def _worker(raw: bytes) -> WorkerInfo | None:
    try:
        entry = msgpack.unpackb(raw, raw=False, strict_map_key=False)
        if type(entry) is not dict:
            return None
        tasks = tuple(task for task in map(_task, entry.get("tasks", ())) if task is not None)
        return WorkerInfo(
            _text(entry["id"]),
            _text(entry["host"]),
            _whole(entry["pid"]),
            tuple(_text(q) for q in entry["queues"]),
            _whole(entry["processes"]),
            _whole(entry["slots"]),
            _whole(entry["threads"]),
            _moment(entry["started"]),
            _moment(entry["heartbeat"]),
            tasks,
        )
    except Exception:  # any shape but ours: not a worker this version can show
        return None


def _task(row: object) -> RunningTask | None:
    if not isinstance(row, list) or len(row) != 5:
        return None
    task_id, name, queue, child, since = row
    try:
        return RunningTask(
            _text(task_id),
            None if name is None else _text(name),
            _text(queue),
            _whole(child),
            _moment(since),
        )
    except (TypeError, ValueError):
        return None


def _text(value: object) -> str:
    if type(value) is not str or len(value) > 1000:
        raise TypeError("not a short string")
    return value


def _whole(value: object) -> int:
    if type(value) is not int or not 0 <= value < 2**63:
        raise TypeError("not a count")
    return value


def _moment(value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < 1e11:
        raise ValueError("not a moment")  # NaN fails the range too
    return float(value)
