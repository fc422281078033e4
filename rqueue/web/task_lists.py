"""A queue's tasks as the dashboard lists them: ready, delayed, running, finished, failed.

Each list is one window read by :mod:`rqueue.store.browse` (or, for failed tasks, a
page of :mod:`rqueue.web.failed_search`), then decoded here, one :class:`Row` per
entry. Everything read is hostile: a payload that does not decode is a row that says
so (its id from the fixed header if it has one), and a kept result that does not read
likewise; a page never fails on what one entry holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rqueue.encoding.payload import Job, readable
from rqueue.encoding.sealing import Keyring
from rqueue.errors import InvalidPayload
from rqueue.failed import PAGE, FailedTask, FailedTasks
from rqueue.metrics import list_workers
from rqueue.store import browse
from rqueue.store.header import payload_id
from rqueue.store.queue import RedisQueue
from rqueue.store.results import decode_result
from rqueue.web.failed_search import Match, search

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}(-.*)?")
"""W3C Trace Context's ``traceparent``: version, trace id, parent span id, flags."""
LISTS = ("ready", "delayed", "running", "finished", "failed")
"""The lists of a queue, in the order a task passes through them."""


@dataclass(frozen=True)
class Row:
    """One task of a list, as far as it reads."""

    id: str
    """Its id, or ``""`` when even the payload's header does not say one."""
    task: str
    job: Job | None
    """Its decoded payload (ready, delayed, running), if it decodes."""
    problem: str = ""
    """Why its payload (or kept result) does not read: shown instead of its fields."""
    at: float | None = None
    """Seconds: when it is due (delayed), its reservation runs out (running), it
    finished or failed (finished, failed)."""
    cancelled: bool = False
    """Cancelled while queued: a worker drops it unrun when it comes up."""
    worker: str = ""
    """Running: the worker and child that run it, if the registry says."""
    since: float | None = None
    """Running: when its worker first saw it running."""
    status: str = ""
    """Finished: succeeded or failed."""
    message: str = ""
    """Finished or failed: the error, if it failed."""
    attempts: int | None = None


@dataclass(frozen=True)
class Listing:
    """A window of one list of one queue."""

    queue: str
    which: str
    """Which list: one of :data:`LISTS`."""
    rows: list[Row]
    total: int | None
    """How many the list held when counted (None: not counted, a search's page)."""
    offset: int
    next_offset: int | None


def listing(queue: RedisQueue, name: str, which: str, offset: int, limit: int = PAGE) -> Listing:
    """The window of list ``which`` (one of :data:`LISTS`) of queue ``name`` at ``offset``."""
    if which == "failed":
        found = search(FailedTasks(queue), Match(queues=(name,)), offset, limit)
        rows = [_failed_row(record) for record in found.records]
        return Listing(name, which, rows, found.total, offset, found.next_offset)
    if which == "finished":
        done = browse.finished(queue, name, offset, limit)
        rows = [_finished_row(entry) for entry in done.entries]
        return _paged(name, which, rows, done.total, offset, len(done.entries))
    read = {"ready": browse.ready, "delayed": browse.delayed, "running": browse.running}[which]
    window = read(queue, name, offset, limit)
    rows = [_row(entry, queue.config.keyring) for entry in window.entries]
    if which == "running":
        rows = _with_workers(queue, rows)
    return _paged(name, which, rows, window.total, offset, len(window.entries))


def _paged(name: str, which: str, rows: list[Row], total: int, offset: int, read: int) -> Listing:
    end = offset + read
    return Listing(name, which, rows, total, offset, end if read and end < total else None)


def decoded(payload: bytes, keyring: Keyring | None = None) -> tuple[str, Job | None, str]:
    """A payload's id, its job, and why it does not decode (``""`` if it does); an
    encrypted call's arguments decrypted with ``keyring``, else left ``sealed``."""
    try:
        job = readable(payload, keyring)
    except InvalidPayload as exc:
        return payload_id(payload) or "", None, str(exc)
    return job.id, job, ""


def trace_id(job: Job | None) -> str | None:
    """The trace id in the job's W3C ``traceparent`` header (the trace its dispatch
    belongs to, issue #28's tracing), or None: no header, or one that is not valid
    (version ``ff``, an all-zero id, anything that does not parse: it came from Redis)."""
    parent = job.headers.get("traceparent") if job is not None and job.headers else None
    found = _TRACEPARENT.fullmatch(parent) if parent is not None else None
    if found is None or found[1] == "ff" or (found[1] == "00" and found[3]):
        return None
    return found[2] if found[2].strip("0") else None


def _row(entry: browse.Entry, keyring: Keyring | None) -> Row:
    task_id, job, problem = decoded(entry.payload, keyring)
    at = entry.score_ms / 1000 if entry.score_ms is not None else None
    return Row(
        task_id,
        job.task if job else "",
        job,
        problem,
        at,
        entry.cancelled,
        attempts=job.attempts if job else None,
    )


def _with_workers(queue: RedisQueue, rows: Sequence[Row]) -> list[Row]:
    """Running rows with the worker and child each runs on, from the worker registry."""
    where = {
        task.id: (f"{worker.host} pid {worker.pid}, child {task.child}", task.started)
        for worker in list_workers(queue)
        for task in worker.tasks
    }
    found = []
    for row in rows:
        worker, since = where.get(row.id, ("", None))
        found.append(replace(row, worker=worker, since=since))
    return found


def _finished_row(entry: browse.Finished) -> Row:
    task_id = entry.task_id or ""
    at = entry.finished_at
    if entry.task_id is None:
        return Row("", "", None, "not a task id (written by hand)", at)
    if entry.record is None:
        return Row(task_id, "", None, "its kept result expired", at)
    try:
        record = decode_result(entry.record, task_id)
    except InvalidPayload as exc:
        return Row(task_id, "", None, str(exc), at)
    error = ""
    if record["state"] == "failed":
        error = f"{record.get('exception', '')}: {record.get('message', '')}"
    attempts = record.get("attempts")
    return Row(
        task_id,
        str(record.get("task", "")),
        None,
        at=at,
        status=str(record["state"]),
        message=error,
        attempts=int(attempts) if isinstance(attempts, int | float) else None,
    )


def _failed_row(record: FailedTask) -> Row:
    return Row(
        record.id,
        record.task,
        None,
        at=record.failed_at,
        status="failed",
        message=f"{record.exception}: {record.message}",
        attempts=record.attempts,
    )
