"""``rqueue batches ...``: list, show, cancel, retry and prune batches, over
:class:`~rqueue.workflows.batches.Batch` and :func:`~rqueue.workflows.prune.prune_batches`.

A batch's name, queues and the ids on the batch list were read from Redis: every field
is printed through ``say``/``table`` (escaped, redacted). An entry of the list that is
not a batch, or whose state does not parse, shows as unreadable instead of ending the
listing; a bad BATCH_ID typed by the user is a usage error.
"""

from __future__ import annotations

import click

from rqueue.cli.common import connection_options, die, moment, say, table
from rqueue.settings.config import Config
from rqueue.store.keys import BatchKeys
from rqueue.store.queue import RedisQueue
from rqueue.workflows.batch_status import BatchStatus
from rqueue.workflows.batches import Batch, batch_of, listed_batches
from rqueue.workflows.prune import prune_batches


def _batch_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Refuse a malformed BATCH_ID as a usage error that names the argument."""
    try:
        BatchKeys.for_batch(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def _status(found: Batch) -> BatchStatus:
    """The batch's status; a batch that is not there ends the command with exit 1."""
    status = found.status()
    if status is None:
        die(f"no batch {found.id} (expired, pruned, or never dispatched)")
    if status.unreadable is not None:
        die(status.unreadable)
    return status


@click.group()
def batches() -> None:
    """List, inspect, cancel, retry and prune batches."""


@batches.command("list")
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=100,
    show_default=True,
    help="Look at the newest LIMIT batches.",
)
@connection_options
def batches_list(config: Config, limit: int) -> None:
    """List batches, newest first.

    Batches expired or pruned are left out; an entry that is not a batch rqueue can
    read shows as unreadable.
    """
    rows: list[tuple[object, ...]] = []
    for batch_id, status in listed_batches(limit, RedisQueue(config)):
        if status is None:
            rows.append((batch_id, "-", "-", "-", "-", "-", "unreadable", "-"))
            continue
        rows.append(
            (
                status.id,
                status.name or "-",
                status.total,
                status.pending,
                status.failed,
                f"{status.progress:.1f}%",
                status.state,
                moment(status.created_at),
            )
        )
    headers = ("id", "name", "total", "pending", "failed", "progress", "state", "created")
    table(headers, rows)


@batches.command("show")
@click.argument("batch_id", callback=_batch_id)
@connection_options
def batches_show(config: Config, batch_id: str) -> None:
    """Show a batch's counts, times and failures.

    Every field of ``Batch.status()``, then the ids of its failed members.
    """
    status = _status(batch_of(batch_id, RedisQueue(config)))
    fields: list[tuple[str, object]] = [
        ("id", status.id),
        ("name", status.name or "-"),
        ("state", status.state),
        ("total", status.total),
        ("pending", status.pending),
        ("processed", status.processed),
        ("succeeded", status.succeeded),
        ("failed", status.failed),
        ("skipped", status.skipped),
        ("progress", f"{status.progress:.1f}%"),
        ("created", moment(status.created_at)),
        ("cancelled", moment(status.cancelled_at) if status.cancelled_at is not None else "-"),
        ("finished", moment(status.finished_at) if status.finished_at is not None else "-"),
        ("queues", ", ".join(status.queues) or "-"),
        ("failed ids", len(status.failed_ids)),
    ]
    if status.parent is not None:
        outer, index = status.parent
        fields.append(("part of", f"batch {outer}, member {index}"))
    if status.after is not None:
        fields.append(("after", status.after))
    if status.nested:
        fields.append(("nested", len(status.nested)))
    for label, value in fields:  # one line each: a newline in a value cannot fake a field
        say(f"{label + ':':<11} {value}")
    for failed_id in status.failed_ids:
        say(f"  {failed_id}")
    for index, nested_id in status.nested:
        say(f"  member {index}: batch {nested_id}")


@batches.command("cancel")
@click.argument("batch_id", callback=_batch_id)
@connection_options
def batches_cancel(config: Config, batch_id: str) -> None:
    """Cancel a batch: skip members not started.

    Members already running finish; the rest are counted as skipped, not run, so the
    batch still finishes and its finally callback runs.
    """
    if batch_of(batch_id, RedisQueue(config)).cancel():
        say(f"Cancelled batch {batch_id}: members not started yet will be skipped.")
    else:
        say(f"Batch {batch_id} was cancelled already.")


@batches.command("retry")
@click.argument("batch_id", callback=_batch_id)
@connection_options
def batches_retry(config: Config, batch_id: str) -> None:
    """Re-dispatch a batch's failed members.

    As Laravel's queue:retry-batch: each is pushed back onto its queue with its
    attempts reset; one that succeeds then counts as succeeded instead of failed. A
    batch its first failure cancelled is opened again; one with no failed member,
    cancelled by hand, stays cancelled.
    """
    found = batch_of(batch_id, RedisQueue(config))
    _status(found)  # exit 1 if there is no such batch: retry() alone would say 0
    say(f"Retried {found.retry()} failed member(s) of batch {batch_id}.")
    if _status(found).cancelled:
        say("The batch is cancelled: workers skip its members instead of running them.")


@batches.command("prune")
@click.option(
    "--hours",
    type=click.IntRange(min=0),
    default=24,
    show_default=True,
    help="Delete the batches that finished more than this many hours ago.",
)
@connection_options
def batches_prune(config: Config, hours: int) -> None:
    """Delete batches finished over --hours ago.

    Batches still running stay. Entries of the batch list whose batch has expired
    are dropped too.
    """
    pruned = prune_batches(hours, RedisQueue(config))
    say(
        f"Pruned {pruned.finished} batch(es) finished more than {hours} hour(s) ago; "
        f"dropped {pruned.gone} list entry(ies) whose batch was gone."
    )
    if pruned.unreadable:
        say(f"Left {pruned.unreadable} unreadable list entry(ies) alone (see batches list).")
