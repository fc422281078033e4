"""``rqueue size``, ``clear``, ``restart`` and ``cancel``: what is in the queues, and
changing it, over :class:`~rqueue.store.queue.RedisQueue`."""

from __future__ import annotations

import time

import click

from rqueue.cli.common import connection_options, die, say, table
from rqueue.config import Config
from rqueue.store.cancel import CancelOutcome, cancel_anywhere
from rqueue.store.keys import validate_queue_name
from rqueue.store.queue import RedisQueue


@click.command()
@click.argument("queues", nargs=-1)
@connection_options
def size(config: Config, queues: tuple[str, ...]) -> None:
    """Show ready, delayed, reserved and failed counts of QUEUES (default: all known)."""
    queue = RedisQueue(config)
    names = [validate_queue_name(q) for q in queues] or queue.known_queues()
    rows = [(s.name, s.ready, s.delayed, s.reserved, s.failed) for s in queue.sizes(names)]
    table(("queue", "ready", "delayed", "reserved", "failed"), rows)


@click.command()
@click.argument("queue_name", metavar="QUEUE")
@connection_options
def clear(config: Config, queue_name: str) -> None:
    """Delete every ready, delayed and reserved task of QUEUE (failed ones stay)."""
    deleted = RedisQueue(config).clear(validate_queue_name(queue_name))
    say(f"Cleared {deleted} task(s) from queue {queue_name}.")


@click.command()
@connection_options
def restart(config: Config) -> None:
    """Ask every running worker to reload after its current tasks."""
    RedisQueue(config).request_restart(time.time())
    say("Restart requested: workers reload after their current tasks.")


@click.command()
@click.argument("task_id")
@click.option("--queue", "queues", multiple=True, help="Look only in this queue (repeatable).")
@connection_options
def cancel(config: Config, task_id: str, queues: tuple[str, ...]) -> None:
    """Cancel a ready or delayed task that has not started (exit 1 if it was not cancelled)."""
    result = cancel_anywhere(RedisQueue(config), task_id, queues or None)
    where = f" on queue {result.queue}" if result.queue else ""
    message = f"task {task_id}{where} {result.outcome.message}"
    if result.outcome is CancelOutcome.CANCELLED:
        say(f"Task {task_id}{where} cancelled; it will not run.")
        return
    die(message)
