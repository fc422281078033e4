"""``rqueue failed ...``: inspect, retry and forget failed tasks, over :class:`FailedTasks`.

A record is read from Redis and its message and traceback come from task code: every
field is printed through ``say``/``table`` (escaped, redacted), never raw.
"""

from __future__ import annotations

import shlex

import click

from rqueue.cli.common import (
    connection_options,
    die,
    moment,
    say,
    table,
    warn_of_unknown_queues,
)
from rqueue.failed import MOST_SCANNED, PAGE, STEP, FailedTask, FailedTasks, Step
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue


@click.group()
def failed() -> None:
    """Inspect, retry and forget failed tasks."""


@failed.command("list")
@click.option("--queue", "queues", multiple=True, help="Only this queue (repeatable).")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=PAGE,
    show_default=True,
    help="Show at most this many.",
)
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    default=0,
    help="Skip this many, counting from the newest (the next page's offset is printed).",
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    help="Only tasks with this tag (repeatable: with every one given); reads at most "
    f"the newest {MOST_SCANNED:,} records.",
)
@connection_options
def failed_list(
    config: Config, queues: tuple[str, ...], limit: int, offset: int, tags: tuple[str, ...]
) -> None:
    """List failed tasks, newest first, a page at a time.

    The table goes to stdout; how many there are in all, and the command for the next
    page, go to stderr, so the table can be piped on its own.
    """
    store = RedisQueue(config)
    warn_of_unknown_queues(store, queues)
    if tags:
        _tagged(FailedTasks(store), queues, limit, offset, tags)
        return
    page = FailedTasks(store).page(queues or None, offset, limit)
    _table(page.records)
    if page.unreadable:
        say(f"{page.unreadable} unreadable record(s) in this window left out.", err=True)
    if page.end > page.offset:
        say(f"{page.offset + 1}-{page.end} of {page.total} failed task(s).", err=True)
    elif page.total:
        say(f"Nothing past offset {page.offset}: there are {page.total} failed task(s).", err=True)
    if page.end < page.total:
        _next_page(page.end, limit, queues, tags)


def _tagged(
    failed_tasks: FailedTasks,
    queues: tuple[str, ...],
    limit: int,
    offset: int,
    tags: tuple[str, ...],
) -> None:
    """The page of failed tasks with every one of ``tags``: a scan, newest first (no
    index of tags), offsets counting matches."""
    wanted = set(tags)
    found = failed_tasks.matching(
        lambda record: wanted.issubset(record.tags()), queues or None, offset, limit
    )
    _table(found.records)
    what = " and ".join(tags)
    if found.records:
        shown = f"{offset + 1}-{offset + len(found.records)}"
        say(f"{shown} of the failed tasks tagged {what}.", err=True)
    else:
        say(
            f"No failed tasks tagged {what}{' past offset ' + str(offset) if offset else ''}.",
            err=True,
        )
    if found.scanned_out:
        say(
            f"Searched the newest {MOST_SCANNED:,} failed records only: "
            "name a queue to look further.",
            err=True,
        )
    if found.next_offset is not None:
        _next_page(found.next_offset, limit, queues, tags)


def _table(records: list[FailedTask]) -> None:
    rows = [
        (
            f.id,
            f.queue,
            f.task or "-",
            f.attempts,
            moment(f.failed_at),
            _short(f"{f.exception}: {f.message}"),
        )
        for f in records
    ]
    table(("id", "queue", "task", "attempts", "failed at", "error"), rows)


def _next_page(offset: int, limit: int, queues: tuple[str, ...], tags: tuple[str, ...]) -> None:
    more = [f"--offset {offset}"] + ([f"--limit {limit}"] if limit != PAGE else [])
    more += [f"--queue {name}" for name in queues]
    more += [f"--tag {shlex.quote(tag)}" for tag in tags]
    say(f"Next page: rqueue failed list {' '.join(more)}", err=True)


@failed.command("show")
@click.argument("task_id")
@connection_options
def failed_show(config: Config, task_id: str) -> None:
    """Show everything recorded about one failed task."""
    found = _found(task_id, FailedTasks(RedisQueue(config)).find(task_id))
    job = found.job(config.keyring)
    fields: list[tuple[str, object]] = [
        ("id", found.id),
        ("queue", found.queue),
        ("task", found.task or "-"),
    ]
    if job is not None:
        if job.sealed:  # this process has no key that decrypts them
            fields += [("args", "encrypted"), ("kwargs", "encrypted")]
        else:
            fields += [("args", list(job.args)), ("kwargs", job.kwargs)]
        fields += [("meta", job.meta)] if job.meta else []
    else:
        fields.append(("payload", found.payload[:200]))
    fields += [
        ("attempts", found.attempts),
        ("failed at", moment(found.failed_at)),
        ("worker", f"{found.host} pid {found.pid}"),
        ("timed out", "yes" if found.timed_out else "no"),
        ("error", f"{found.exception}: {found.message}"),
    ]
    for label, value in fields:  # one line each: a newline in a value cannot fake a field
        say(f"{label + ':':<10} {value if isinstance(value, str) else repr(value)}")
    if found.traceback:
        say("")
        say(found.traceback.rstrip(), multiline=True)


@failed.command("retry")
@click.argument("task_ids", nargs=-1)
@click.option("--all", "retry_all", is_flag=True, help="Retry every failed task.")
@click.option("--queue", "queues", multiple=True, help="With --all: only this queue.")
@connection_options
def failed_retry(
    config: Config, task_ids: tuple[str, ...], retry_all: bool, queues: tuple[str, ...]
) -> None:
    """Push failed tasks back onto their queues with their attempts reset."""
    failed_tasks = FailedTasks(RedisQueue(config))
    if retry_all == bool(task_ids):
        raise click.UsageError("give task ids or --all, not both or neither")
    if queues and not retry_all:
        raise click.UsageError("--queue goes with --all")
    if retry_all:
        retried = 0
        for step in failed_tasks.retry_chunks(queues or None):
            retried += step.done
            _progress("retried", step)
        say(f"Retried {retried} failed task(s).")
        return
    found = failed_tasks.find_all(task_ids)  # one scan for all of them
    for task_id in task_ids:
        failed_task = _found(task_id, found.get(task_id))
        failed_tasks.retry(failed_task)
        say(f"Retried {failed_task.id} on queue {failed_task.queue}.")


@failed.command("forget")
@click.argument("task_id")
@connection_options
def failed_forget(config: Config, task_id: str) -> None:
    """Delete one failed task."""
    failed_tasks = FailedTasks(RedisQueue(config))
    found = _found(task_id, failed_tasks.find(task_id))
    failed_tasks.forget(found)
    say(f"Forgot failed task {found.id}.")


@failed.command("flush")
@click.option("--queue", "queues", multiple=True, help="Only this queue (repeatable).")
@connection_options
def failed_flush(config: Config, queues: tuple[str, ...]) -> None:
    """Delete every failed task."""
    flushed = 0
    for step in FailedTasks(RedisQueue(config)).flush_chunks(queues or None):
        flushed += step.done
        _progress("flushed", step)
    say(f"Flushed {flushed} failed task(s).")


def _progress(verb: str, step: Step) -> None:
    """A line on stderr after each step of a queue of over :data:`STEP` records: a
    long run shows it is moving, and stopped midway, how far it got (running it again
    does the rest)."""
    if step.held > STEP:
        say(f"{step.queue}: {step.seen} of {step.held} looked at, {step.done} {verb}", err=True)


def _found(task_id: str, failed_task: FailedTask | None) -> FailedTask:
    """The failed task found for this id; a missing one ends the command with exit 1."""
    if failed_task is None:
        die(f"no failed task with id {task_id}")
    return failed_task


def _short(text: str, width: int = 60) -> str:
    """``text`` on one line, cut to ``width`` with an ellipsis so a table row stays one line."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
