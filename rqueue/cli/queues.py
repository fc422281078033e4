"""``rqueue size``, ``clear``, ``pause``, ``resume``, ``restart`` and ``cancel``: what is
in the queues, and changing it, over :class:`~rqueue.store.queue.RedisQueue`."""

from __future__ import annotations

import fnmatch
import sys
import time

import click

from rqueue.cli.common import connection_options, die, queue_list, say, warn_of_unknown_queues
from rqueue.metrics.read import SIZES_PER_CALL
from rqueue.settings.config import Config
from rqueue.store.cancel import CancelOutcome, cancel_anywhere
from rqueue.store.keys import validate_queue_name
from rqueue.store.queue import RedisQueue
from rqueue.text import shown


@click.command()
@click.argument("queues", nargs=-1)
@click.option(
    "--match",
    metavar="PATTERN",
    help="Only known queues whose name matches this glob (e.g. 'tenant-*').",
)
@connection_options
def size(config: Config, queues: tuple[str, ...], match: str | None) -> None:
    """Show ready, delayed, reserved and failed counts of QUEUES (default: all known);
    a paused queue's row ends with ``paused``, and one with prioritised tasks ready with
    their count per level (``levels 0=3 5=10``: level 5 holds those without a priority),
    and one with fair groups ready with how many (``groups 12``)."""
    queue = RedisQueue(config)
    names = [validate_queue_name(q) for q in queues] or queue.known_queues()
    if queues:  # named on the command line: a typo must not answer zeros in silence
        warn_of_unknown_queues(queue, names)
    if match is not None:
        names = [name for name in names if fnmatch.fnmatchcase(name, match)]
    headers = ("queue", "ready", "delayed", "reserved", "failed")
    # Widths fixed before the first count arrives, so rows print as they come: the
    # names are known, and a count under a hundred million fits "reserved"'s width.
    widths = [max(len(name) for name in [headers[0], *names])] + [8] * 4
    _row(headers, widths)
    for start in range(0, len(names), SIZES_PER_CALL):
        for s in queue.sizes(names[start : start + SIZES_PER_CALL]):
            state: tuple[str, ...] = ("paused",) if s.paused else ()
            if s.levels:
                state += (f"levels {s.by_level}",)
            if s.groups:
                state += (f"groups {s.groups:,}",)
            _row(
                (s.name, s.ready, s.delayed, s.reserved, s.failed, *state),
                widths + [0] * len(state),
            )
    if not names:
        say("(none)")


def _row(cells: tuple[object, ...], widths: list[int]) -> None:
    say("  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())


@click.command()
@click.argument("queue_name", metavar="QUEUE")
@click.option("--force", is_flag=True, help="Do not ask (for scripts; needed without a terminal).")
@connection_options
def clear(config: Config, queue_name: str, force: bool) -> None:
    """Delete every ready, delayed, reserved and waiting task of QUEUE (failed ones stay).

    Asks first on a terminal, showing what it would delete; without one (a script, a
    pipe) it refuses unless given --force, as Laravel's queue:clear asks in production.
    """
    queue = RedisQueue(config)
    name = validate_queue_name(queue_name)
    warn_of_unknown_queues(queue, [name])
    size = queue.sizes([name])[0]
    if size.ready or size.delayed or size.reserved:
        what = (
            f"{size.ready} ready, {size.delayed} delayed and {size.reserved} reserved "
            f"(running now: their results are then lost) task(s) of queue {name}"
        )
        if not force:
            _confirm_clear(what)
    deleted = queue.clear(name)
    say(f"Cleared {deleted} task(s) from queue {queue_name}.")


def _confirm_clear(what: str) -> None:
    """Ask on a terminal; refuse without one (a usage error naming --force)."""
    if not sys.stdin.isatty():
        raise click.UsageError(
            shown(f"this would delete {what}; no terminal to confirm it on: pass --force")
        )
    if not click.confirm(shown(f"Delete {what}? Failed tasks stay"), default=False):
        say("Nothing deleted.")
        sys.exit(1)


@click.command()
@click.argument("queues")
@connection_options
def pause(config: Config, queues: str) -> None:
    """Stop workers taking tasks from QUEUES (comma-separated); running tasks finish and
    new ones are still accepted. ``rqueue resume`` undoes it."""
    _set_paused(config, queues, paused=True)


@click.command()
@click.argument("queues")
@connection_options
def resume(config: Config, queues: str) -> None:
    """Let workers take tasks from paused QUEUES (comma-separated) again."""
    _set_paused(config, queues, paused=False)


def _set_paused(config: Config, queues: str, paused: bool) -> None:
    queue = RedisQueue(config)
    names = queue_list(queues)
    warn_of_unknown_queues(queue, names)
    for name in names:
        changed = queue.pause(name) if paused else queue.resume(name)
        state = "paused" if paused else "resumed"
        say(f"Queue {name} {state}." if changed else f"Queue {name} was already {state}.")


@click.command()
@connection_options
def restart(config: Config) -> None:
    """Ask every running worker to reload after its current tasks."""
    RedisQueue(config).request_restart(time.time())
    say("Restart requested: workers reload after their current tasks.")


@click.command()
@click.argument("task_id")
@click.option("--queue", "queues", multiple=True, help="Look only in this queue (repeatable).")
@click.option(
    "--fail", is_flag=True, help="A running task goes to the failed list too once it stops."
)
@connection_options
def cancel(config: Config, task_id: str, queues: tuple[str, ...], fail: bool) -> None:
    """Cancel a task: a ready or delayed one at once, a running one by a request its
    worker delivers within a second (exit 0 once delivered, 1 if not cancelled)."""
    queue = RedisQueue(config)
    warn_of_unknown_queues(queue, [validate_queue_name(name) for name in queues])
    result = cancel_anywhere(queue, task_id, queues or None, fail)
    where = f" on queue {result.queue}" if result.queue else ""
    message = f"task {shown(task_id)}{where} {result.outcome.message}"
    if result.outcome is CancelOutcome.CANCELLED:
        say(f"Task {shown(task_id)}{where} cancelled; it will not run.")
        return
    if result.outcome is CancelOutcome.CANCELLING:
        say(f"Task {shown(task_id)}{where} {result.outcome.message}.")
        return
    die(message)
