"""``rqueue work``: run a worker pool (a :class:`~rqueue.worker.supervisor.Supervisor`).

Most options set the :class:`~rqueue.worker.options.WorkerOptions` field of the same
name and take that field's default, so the command and the Python API cannot drift.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from rqueue.cli.common import F, connection_options
from rqueue.config import Config
from rqueue.store.keys import validate_queue_name
from rqueue.worker import logs
from rqueue.worker.options import WorkerOptions

_SECONDS = click.FloatRange(min=0)
_NON_NEGATIVE = click.IntRange(min=0)


def _field_option(
    flag: str,
    kind: click.IntRange | click.FloatRange,
    help: str,
    *,
    short: str | None = None,
    show_default: bool = True,
) -> Callable[[F], F]:
    """``--some-field`` for ``WorkerOptions.some_field``, defaulting to the field's default."""
    default = getattr(WorkerOptions, flag.removeprefix("--").replace("-", "_"))
    flags = (short, flag) if short else (flag,)
    return click.option(*flags, type=kind, default=default, show_default=show_default, help=help)


def _queue_list(value: str) -> tuple[str, ...]:
    """QUEUES as checked names, so a bad one is a usage error (exit 2), not a traceback."""
    names = tuple(n.strip() for n in value.split(","))
    try:
        return tuple(validate_queue_name(n) for n in names)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.argument("queues", default="default")
@_field_option(
    "--timeout",
    click.FloatRange(min=0.001),
    "Seconds a task may run unless it sets its own timeout.",
)
@_field_option("--concurrency", click.IntRange(min=1), "Child processes running tasks.", short="-c")
@_field_option(
    "--tries", click.IntRange(min=1), "Attempts a task gets unless it sets its own tries."
)
@_field_option("--sleep", _SECONDS, "Seconds between polls when --block-for is 0.")
@_field_option(
    "--block-for",
    _SECONDS,
    "Seconds an idle child blocks waiting for a push (0: poll with --sleep).",
)
@click.option("--once", is_flag=True, help="Process one task, then exit.")
@click.option("--stop-when-empty", is_flag=True, help="Exit 0 once no task is ready or running.")
@_field_option("--max-jobs", _NON_NEGATIVE, "Stop after this many tasks.", show_default=False)
@_field_option("--max-time", _SECONDS, "Stop after this many seconds.", show_default=False)
@_field_option(
    "--memory", _NON_NEGATIVE, "Recycle a child whose RSS exceeds this many MB.", show_default=False
)
@_field_option("--rest", _SECONDS, "Seconds to rest after each task.", show_default=False)
@_field_option(
    "--prefetch",
    click.IntRange(1, 1000),
    "Most tasks a child reserves at once when the queue is deep.",
)
@_field_option(
    "--kill-grace", _SECONDS, "Seconds past a task's timeout before its child is killed."
)
@click.option("-A", "--app", "preload", multiple=True, help="Module to import in the parent first.")
@click.option(
    "--schedule/--no-schedule",
    default=True,
    show_default=True,
    help="Fire due schedules of these queues from this worker's parent.",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@connection_options
def work(config: Config, queues: str, log_level: str, log_format: str, **options: Any) -> None:
    """Run tasks from QUEUES (comma-separated, highest priority first)."""
    from rqueue.worker.supervisor import Supervisor

    try:
        worker_options = WorkerOptions(queues=_queue_list(queues), **options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in worker_options.preload:  # a typo is a usage error, not a traceback
        try:
            found = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise click.UsageError(f"-A/--app: no module named {module!r} here or on sys.path")
    logs.configure(log_level, log_format)
    sys.exit(Supervisor(worker_options, config).run())
