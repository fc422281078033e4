"""``rqueue monitor``: queue sizes and the oldest wait, exit 1 over a limit (for cron).

Like Laravel's ``queue:monitor``: run it from cron or a health check and alert on its
exit status. A queue is over its limit when more than ``--max`` tasks are ready, or
(with ``--max-wait``) when the next ready task has waited longer than that. The wait
is the real age of the task at the head of the ready list (see
:func:`rqueue.metrics.oldest_wait`), not an estimate from throughput.
"""

from __future__ import annotations

import json
import sys

import click

from rqueue.cli.common import connection_options, finite_seconds, queue_list, say, table
from rqueue.metrics.read import queue_rows
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
    help="Most seconds the oldest ready task may have waited (default: no limit).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@connection_options
def monitor(config: Config, queues: str, most: int, max_wait: float | None, as_json: bool) -> None:
    """Show QUEUES' (comma-separated) sizes and oldest wait; exit 1 if any is over --max
    (or --max-wait)."""
    names = list(queue_list(queues))
    queue = RedisQueue(config)
    rows = []
    for row in queue_rows(queue, names):
        size, wait = row.size, row.oldest_wait
        over = size.ready > most or (max_wait is not None and wait is not None and wait > max_wait)
        rows.append((size, wait, over))
    if as_json:
        report = [
            {
                "queue": size.name,
                "ready": size.ready,
                "delayed": size.delayed,
                "reserved": size.reserved,
                "failed": size.failed,
                "oldest_wait": wait,
                "over": over,
            }
            for size, wait, over in rows
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
                    "OVER" if over else "ok",
                )
                for size, wait, over in rows
            ],
        )
    over_names = [size.name for size, _, over in rows if over]
    if over_names:
        limits = f"--max {most}" + ("" if max_wait is None else f", --max-wait {max_wait:g}")
        say(f"rqueue: over the limit ({limits}): {', '.join(over_names)}", err=True)
        sys.exit(1)
