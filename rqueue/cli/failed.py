"""``rqueue failed ...``: inspect, retry and forget failed tasks, over :class:`FailedTasks`.

A record is read from Redis and its message and traceback come from task code: every
field is printed through ``say``/``table`` (escaped, redacted), never raw.
"""

from __future__ import annotations

from datetime import datetime

import click

from rqueue.cli.common import connection_options, die, say, table
from rqueue.config import Config
from rqueue.failed import FailedTask, FailedTasks
from rqueue.store.queue import RedisQueue


@click.group()
def failed() -> None:
    """Inspect, retry and forget failed tasks."""


@failed.command("list")
@click.option("--queue", "queues", multiple=True, help="Only this queue (repeatable).")
@connection_options
def failed_list(config: Config, queues: tuple[str, ...]) -> None:
    """List failed tasks, oldest first."""
    rows = [
        (
            f.id,
            f.queue,
            f.task or "-",
            f.attempts,
            _when(f.failed_at),
            _short(f"{f.exception}: {f.message}"),
        )
        for f in FailedTasks(RedisQueue(config)).list(queues or None)
    ]
    table(("id", "queue", "task", "attempts", "failed at", "error"), rows)


@failed.command("show")
@click.argument("task_id")
@connection_options
def failed_show(config: Config, task_id: str) -> None:
    """Show everything recorded about one failed task."""
    found = _find(FailedTasks(RedisQueue(config)), task_id)
    job = found.job()
    fields: list[tuple[str, object]] = [
        ("id", found.id),
        ("queue", found.queue),
        ("task", found.task or "-"),
    ]
    if job is not None:
        fields += [("args", list(job.args)), ("kwargs", job.kwargs)]
        fields += [("meta", job.meta)] if job.meta else []
    else:
        fields.append(("payload", found.payload[:200]))
    fields += [
        ("attempts", found.attempts),
        ("failed at", _when(found.failed_at)),
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
        say(f"Retried {failed_tasks.retry_all(queues or None)} failed task(s).")
        return
    for task_id in task_ids:
        found = _find(failed_tasks, task_id)
        failed_tasks.retry(found)
        say(f"Retried {found.id} on queue {found.queue}.")


@failed.command("forget")
@click.argument("task_id")
@connection_options
def failed_forget(config: Config, task_id: str) -> None:
    """Delete one failed task."""
    failed_tasks = FailedTasks(RedisQueue(config))
    found = _find(failed_tasks, task_id)
    failed_tasks.forget(found)
    say(f"Forgot failed task {found.id}.")


@failed.command("flush")
@click.option("--queue", "queues", multiple=True, help="Only this queue (repeatable).")
@connection_options
def failed_flush(config: Config, queues: tuple[str, ...]) -> None:
    """Delete every failed task."""
    say(f"Flushed {FailedTasks(RedisQueue(config)).flush(queues or None)} failed task(s).")


def _find(failed_tasks: FailedTasks, task_id: str) -> FailedTask:
    """The failed task with this id; a missing one ends the command with exit 1."""
    found = failed_tasks.find(task_id)
    if found is None:
        die(f"no failed task with id {task_id}")
    return found


def _when(timestamp: float) -> str:
    """Local time to the second: a failure is read by a person looking at their clock."""
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def _short(text: str, width: int = 60) -> str:
    """``text`` on one line, cut to ``width`` with an ellipsis so a table row stays one line."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
