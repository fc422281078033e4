"""``rqueue monitor``: queue sizes and the oldest wait, exit 1 over a limit (for cron).

Like Laravel's ``queue:monitor``: run it from cron or a health check and alert on its
exit status. A queue is over its limit when more than ``--max`` tasks are ready, or
when the next ready task has waited longer than the queue's wait limit: ``--wait
QUEUE=SECONDS`` for one queue (Horizon's ``waits``), ``--wait SECONDS`` or
``--max-wait SECONDS`` for every other (:class:`~rqueue.metrics.wait_limits.
WaitLimits`). The wait is the real age of the task at the head of the ready list (see
:func:`rqueue.metrics.oldest_wait`), not an estimate from throughput.
"""

from __future__ import annotations

import json
import sys

import click

from rqueue.cli.common import connection_options, finite_seconds, queue_list, say, table
from rqueue.metrics.read import queue_rows
from rqueue.metrics.wait_limits import WaitLimits
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue


@click.command()
@click.argument("queues")
@click.option(
    "--max",
    "most",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Most ready tasks a queue may hold before it counts as over.",
)
@click.option(
    "--max-wait",
    type=float,
    callback=finite_seconds,
    default=None,
    help="Most seconds the oldest ready task of any queue may have waited (default: no "
    "limit); as --wait SECONDS.",
)
@click.option(
    "--wait",
    "waits",
    multiple=True,
    metavar="[QUEUE=]SECONDS",
    help="Most seconds the oldest ready task of QUEUE may have waited (repeatable); "
    "without QUEUE=, of every queue not named.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@connection_options
def monitor(
    config: Config,
    queues: str,
    most: int,
    max_wait: float | None,
    waits: tuple[str, ...],
    as_json: bool,
) -> None:
    """Show QUEUES' (comma-separated) sizes and oldest wait; exit 1 if any is over --max
    or waits longer than its limit (--wait, --max-wait)."""
    try:
        limits = WaitLimits.parse(waits, max_wait)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--wait") from None
    names = list(queue_list(queues))
    queue = RedisQueue(config)
    rows = []
    for row in queue_rows(queue, names):
        size, wait = row.size, row.oldest_wait
        waits_long = limits.over(size.name, wait)
        rows.append((size, wait, size.ready > most or waits_long, waits_long))
    if as_json:
        report = [
            {
                "queue": size.name,
                "ready": size.ready,
                "delayed": size.delayed,
                "reserved": size.reserved,
                "failed": size.failed,
                "oldest_wait": wait,
                "wait_limit": limits.limit(size.name),
                "waits_too_long": waits_long,
                "over": over,
            }
            for size, wait, over, waits_long in rows
        ]
        say(json.dumps(report, ensure_ascii=True))
    else:
        table(
            ("queue", "ready", "delayed", "reserved", "failed", "oldest wait", "status"),
            [
                (
                    size.name,
                    size.ready,
                    size.delayed,
                    size.reserved,
                    size.failed,
                    "-" if wait is None else f"{wait:.1f} s",
                    ("OVER (waits)" if waits_long else "OVER") if over else "ok",
                )
                for size, wait, over, waits_long in rows
            ],
        )
    over_names = [size.name for size, _, over, _ in rows if over]
    if over_names:
        given = [f"--max {most}"]
        given += [] if max_wait is None else [f"--max-wait {max_wait:g}"]
        given += [f"--wait {spec}" for spec in waits]
        say(f"rqueue: over the limit ({', '.join(given)}): {', '.join(over_names)}", err=True)
        sys.exit(1)
