"""``rqueue status TASK_ID``: a kept task's status, tags, attempts, timings, its latest
progress, and its result or error, over :mod:`rqueue.store.results` and
:mod:`rqueue.store.progress` (the reads behind ``Dispatched.status()`` and
``progress()``); for a task that keeps no result, where it is now
(:func:`rqueue.tasks.whereabouts.locate`, as the dashboard's task page).

The record was read from Redis and its values were written by task code: every field
is printed through ``say`` (escaped, redacted), one field per line, so a newline in a
value cannot pass for a field of its own. A record that does not decode ends the
command with one clear line (exit 1), never a traceback.
"""

from __future__ import annotations

from typing import Any

import click

from rqueue.cli.common import connection_options, die, moment, say
from rqueue.encoding.payload import CHAIN, Job
from rqueue.errors import InvalidPayload, InvalidQueueName
from rqueue.settings.config import Config
from rqueue.store.keys import validate_queue_name
from rqueue.store.progress import Progress
from rqueue.store.progress import read as read_progress
from rqueue.store.queue import RedisQueue
from rqueue.store.results import find_queue, read_status
from rqueue.tasks.whereabouts import locate
from rqueue.workflows.batches import BATCH, member_index


def _queue_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse a bad ``--queue`` as a usage error that names the option."""
    if value is None:
        return None
    try:
        return validate_queue_name(value)
    except InvalidQueueName as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.argument("task_id")
@click.option("--queue", callback=_queue_name, help="The task's queue (default: search them).")
@connection_options
def status(config: Config, task_id: str, queue: str | None) -> None:
    """Show TASK_ID's status, attempts, tags, timings, progress, and its result or error.

    A task that keeps its result (keep_result) has all of it; any other shows where it
    is while it waits or runs, and its error once it failed. Exit 1 if nothing knows it.
    """
    redis_queue = RedisQueue(config)
    queue_name = queue or find_queue(redis_queue, task_id)
    found = read_status(redis_queue, queue_name, task_id) if queue_name else None
    if found is None or found.status == "unknown":
        _whereabouts(redis_queue, task_id, queue)
        return
    record = found.record
    fields: list[tuple[str, object]] = [
        ("id", found.id),
        ("queue", found.queue),
        ("status", found.status),
    ]
    fields += [(field, record[field]) for field in ("task", "attempts") if field in record]
    if record.get("tags"):
        fields.append(("tags", ", ".join(record["tags"])))
    if "due" in record:
        fields.append(("due", moment(record["due"] / 1000)))
    if "started_at" in record:
        fields.append(("started", moment(record["started_at"])))
    if "finished_at" in record:
        took = record["finished_at"] - record.get("started_at", record["finished_at"])
        fields.append(("finished", f"{moment(record['finished_at'])} (took {took:.3f} s)"))
    progress = read_progress(redis_queue, found.queue, found.id)
    if progress is not None:
        fields.append(("progress", _progress(progress)))
    if found.status == "succeeded":
        fields.append(("result", _repr(record.get("result"))))
    if found.status == "failed":
        fields.append(("error", f"{record.get('exception', '')}: {record.get('message', '')}"))
    for label, value in fields:
        say(f"{label + ':':<10} {value}")
    if found.status == "failed" and record.get("traceback"):
        say("")
        say(record["traceback"].rstrip(), multiline=True)


def _whereabouts(redis_queue: RedisQueue, task_id: str, queue: str | None) -> None:
    """The status of a task that keeps no result: where it is now (waiting, running,
    cancelled, failed), what its payload says, its progress; exit 1 if nothing knows it."""
    where = locate(redis_queue, task_id, queue)
    if where.state == "":
        said = f" on queue {queue}" if queue else ""
        die(
            f"no status for task {task_id}{said}: it is not waiting or running, it keeps "
            "no result (see keep_result) or its result expired, and it is not in a failed "
            "list; or no such task was dispatched"
        )
    fields: list[tuple[str, object]] = [
        ("id", task_id),
        ("queue", where.queue),
        ("status", where.state),
    ]
    job = where.job
    if job is not None:
        fields += [("task", job.task), ("attempts", job.attempts), *_workflow(job)]
    elif where.payload_problem:
        fields.append(("payload", f"does not decode: {where.payload_problem}"))
    if where.tags:
        fields.append(("tags", ", ".join(where.tags)))
    held = where.held
    if held is not None and held.score_ms is not None:
        label = "due" if held.state == "delayed" else "reserved until"
        fields.append((label, moment(held.score_ms / 1000)))
    if where.progress is not None:
        fields.append(("progress", _progress(where.progress)))
    if where.failed is not None:
        fields.append(("error", f"{where.failed.exception}: {where.failed.message}"))
    for label, value in fields:
        say(f"{label + ':':<10} {value}")


def _workflow(job: Job) -> list[tuple[str, object]]:
    """Where the task sits in a workflow, as its payload says: the batch it counts for
    (``rqueue batches show`` goes on from there), the chain's steps still to come."""
    fields: list[tuple[str, object]] = []
    if BATCH in job.meta:
        try:
            fields.append(("batch", f"{job.meta[BATCH]}, member {member_index(job)}"))
        except InvalidPayload as exc:
            fields.append(("batch", f"does not read: {exc}"))
    steps = job.meta.get(CHAIN)
    if isinstance(steps, list) and steps:
        fields.append(("chain", f"{len(steps)} step(s) to come"))
    return fields


def _progress(progress: Progress) -> str:
    """``40% resized 4 of 10 (at <time>)``: the message is the task's, escaped by ``say``."""
    said = f" {progress.message}" if progress.message else ""
    return f"{progress.fraction:.0%}{said} (at {moment(progress.at)})"


def _repr(value: Any) -> str:
    """``repr(value)``; msgpack nests deeper than ``repr`` can recurse (up to 1023 levels)."""
    try:
        return repr(value)
    except RecursionError:
        return f"(a {type(value).__name__} nested too deeply to show)"
