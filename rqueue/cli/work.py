"""``rqueue work``: run a worker pool (a :class:`~rqueue.worker.supervisor.Supervisor`).

Most options set the :class:`~rqueue.worker.options.WorkerOptions` field of the same
name and take that field's default and range, so the command and the Python API cannot
drift.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

from rqueue.cli.common import (
    F,
    connection_options,
    declared_queues,
    log_options,
    preload_module,
    queue_list,
    unknown_queues,
)
from rqueue.middleware.concurrency import check_limit
from rqueue.middleware.group_limits import GroupLimits
from rqueue.settings.config import EVENTS_LENGTH, Config, ConfigError, env_flag
from rqueue.store.queue import RedisQueue
from rqueue.store.retry import REDIS_ERRORS
from rqueue.text import shown
from rqueue.worker import logs
from rqueue.worker.options import LIMITS, Rate, WorkerOptions, parse_rates

DEFAULT_EVENTS = 10_000
"""Events each queue's stream keeps with ``--events`` (about: ``XADD MAXLEN ~``)."""


def _field_option(
    flag: str, help: str, *, short: str | None = None, show_default: bool = True
) -> Callable[[F], F]:
    """``--some-field`` for ``WorkerOptions.some_field``: its default, checked by its range.

    The range is the field's entry in ``LIMITS``, checked by the rule ``WorkerOptions``
    applies, so ``--timeout inf`` or ``--sleep nan`` is a usage error that names the
    option and its range. (Click's own ranges let NaN through: every comparison with it
    is false; the worker then looped on tracebacks or stranded a task in ``:reserved``.)
    """
    field = flag.removeprefix("--").replace("-", "_")
    limit = LIMITS[field]

    def in_range(ctx: click.Context, param: click.Parameter, value: float) -> float:
        try:
            return limit.check(flag, value)
        except ConfigError as exc:
            raise click.UsageError(str(exc), ctx) from None

    flags = (short, flag) if short else (flag,)
    return click.option(
        *flags,
        type=int if limit.whole else float,
        default=getattr(WorkerOptions, field),
        callback=in_range,
        show_default=show_default,
        help=help,
    )


@click.command()
@click.argument("queues", default="default")
@_field_option("--timeout", "Seconds a task may run unless it sets its own timeout.")
@_field_option("--concurrency", "Child processes running tasks.", short="-c")
@_field_option(
    "--max-concurrency",
    "Most children --concurrency-file may ask for (0: --concurrency).",
    show_default=False,
)
@click.option(
    "--concurrency-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Read the number of children from this file each second and keep that many "
    "(1 to --max-concurrency), stopping the excess warmly: how `rqueue supervise` "
    "scales a pool. See docs/worker.md.",
)
@_field_option("--tries", "Attempts a task gets unless it sets its own tries.")
@_field_option("--sleep", "Seconds between polls when --block-for is 0.")
@_field_option(
    "--block-for", "Seconds an idle child blocks waiting for a push (0: poll with --sleep)."
)
@click.option("--once", is_flag=True, help="Process one task, then exit.")
@click.option(
    "--stop-when-empty",
    is_flag=True,
    help="Exit 0 once no task is ready or running (delayed ones and retries in backoff "
    "do not count, as in Laravel).",
)
@click.option(
    "--stop-when-drained",
    is_flag=True,
    help="Exit 0 once no task is ready, running, delayed (retries in backoff included) "
    "or reserved by any worker: for scripts and CI.",
)
@_field_option("--max-jobs", "Stop after this many tasks.", show_default=False)
@_field_option("--max-time", "Stop after this many seconds.", show_default=False)
@_field_option("--memory", "Recycle a child whose RSS exceeds this many MB.", show_default=False)
@_field_option("--rest", "Seconds to rest after each task.", show_default=False)
@_field_option("--prefetch", "Most tasks a child reserves at once when the queue is deep.")
@_field_option("--slots", "Most async def tasks a child runs at once on its event loop.")
@_field_option(
    "--threads", "Threads per child running sync tasks at once (0: one at a time, no threads)."
)
@click.option(
    "--pin-cpus/--no-pin-cpus",
    default=None,
    help="Run each child on one CPU of those the worker may use (child n on the n-th, "
    "round robin; Linux): faster for --threads and CPU-light tasks, at the cost of the "
    "kernel's freedom to move them. Default: pinned when --concurrency gives every CPU "
    "a child (and no --concurrency-file). See docs/worker.md.",
)
@_field_option("--kill-grace", "Seconds past a task's timeout before its child is killed.")
@_field_option(
    "--aging",
    "Seconds a priority level's oldest task waits untaken before it runs next "
    "(0: levels are strict). See docs/worker.md.",
    show_default=False,
)
@click.option(
    "-A",
    "--app",
    "preload",
    multiple=True,
    help="Module to import in the parent first; when given, task names may make the worker "
    "import only these modules (repeatable).",
)
@click.option(
    "--schedule/--no-schedule",
    default=True,
    show_default=True,
    help="Fire due schedules of these queues from this worker's parent.",
)
@click.option(
    "--metrics/--no-metrics",
    default=True,
    show_default=True,
    help="Count outcomes per task in Redis and list this worker in `rqueue workers` "
    "(see docs/monitoring.md).",
)
@click.option(
    "--events",
    "record_events",
    is_flag=True,
    help="Record task events in each queue's live event stream, for `rqueue events` and "
    "handle.events() (default RQUEUE_EVENTS; see docs/monitoring.md).",
)
@click.option(
    "--events-length",
    type=int,
    default=None,
    metavar="N",
    help=f"With --events: about how many events each queue's stream keeps "
    f"[default: {DEFAULT_EVENTS}].",
)
@click.option(
    "--rate",
    default=None,
    metavar="RATE",
    help="Start at most this many tasks of each queue per period, across every worker "
    "given the same rate: 100/m, 50/s, 10/2s, 5/h; or per queue: emails=100/m,sms=5/s. "
    "See docs/worker.md.",
)
@click.option(
    "--group-concurrency",
    type=int,
    default=None,
    metavar="N",
    help="Run at most N tasks of each fair group (using(group=...)) at once, across every "
    "worker given the same limit. See docs/worker.md.",
)
@click.option(
    "--group-rate",
    default=None,
    metavar="RATE",
    help="Start at most this many tasks of each fair group per period (10/s, 100/m), "
    "across every worker given the same rate. See docs/worker.md.",
)
@click.option(
    "--otel/--no-otel",
    default=None,
    help="Trace each send and attempt with OpenTelemetry, in the parent and in each child "
    "after its fork (needs rqueue[otel]; default: RQUEUE_OTEL). See docs/monitoring.md.",
)
@log_options
@click.option(
    "--wait-replicas",
    type=int,
    default=None,
    help="Tasks' own dispatches wait until this many replicas have them (Redis WAIT); "
    "default RQUEUE_WAIT_REPLICAS or 0. See docs/deployment.md.",
)
@connection_options
def work(
    config: Config,
    queues: str,
    log_level: str,
    log_format: str,
    wait_replicas: int | None,
    rate: str | None,
    group_concurrency: int | None,
    group_rate: str | None,
    record_events: bool,
    events_length: int | None,
    otel: bool | None,
    **options: Any,
) -> None:
    """Run tasks from QUEUES (comma-separated, highest priority first)."""
    from rqueue.worker.supervisor import Supervisor

    if env_flag("RQUEUE_SYNC"):  # docs/testing.md
        raise click.UsageError(
            "RQUEUE_SYNC is on: sync mode runs each dispatch inline where it is made, so "
            "what this worker's tasks dispatch would run in its children, never queued; "
            "unset RQUEUE_SYNC (or set it to 0) for workers"
        )
    if wait_replicas is not None:
        try:
            config = replace(config, wait_replicas=wait_replicas)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--wait-replicas") from None

    config = _with_events(config, record_events, events_length)
    names = queue_list(queues)
    try:
        rates = {} if rate is None else parse_rates(rate, names)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--rate") from None
    options["group_limits"] = _group_limits(group_concurrency, group_rate)
    if _traced(otel):
        from rqueue.contrib.opentelemetry import instrument

        instrument()  # the parent sends schedules' triggers; each child instruments again
        options["child_setup"] = (instrument,)
    try:
        worker_options = WorkerOptions(queues=names, rates=rates, **options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    logs.configure(log_level, log_format)
    for module in worker_options.preload:  # a typo, or a module that raises, is one line
        preload_module(module)
    _warn_of_unknown_queues(config, worker_options.queues)
    sys.exit(Supervisor(worker_options, config).run())


def _with_events(config: Config, record: bool, length: int | None) -> Config:
    """``--events`` (with ``--events-length``) as ``Config.events``, the cap each queue's
    stream is kept at; without it, what ``RQUEUE_EVENTS`` said (0: none)."""
    if length is not None and not record:
        raise click.UsageError("--events-length is the length of --events's streams: give --events")
    if not record:
        return config
    try:
        cap = EVENTS_LENGTH.check("--events-length", DEFAULT_EVENTS if length is None else length)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--events-length") from None
    return replace(config, events=cap)


def _group_limits(concurrency: int | None, rate: str | None) -> GroupLimits | None:
    """``--group-concurrency`` and ``--group-rate`` as the worker's limits per group."""
    if concurrency is None and rate is None:
        return None
    try:
        concurrency = None if concurrency is None else check_limit(concurrency, "N")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--group-concurrency") from None
    try:
        parsed = None if rate is None else Rate.parse(rate)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--group-rate") from None
    per_group = None if parsed is None else (parsed.limit, parsed.per)
    return GroupLimits(concurrency, per_group)


def _traced(otel: bool | None) -> bool:
    """``--otel``, else ``RQUEUE_OTEL``; on, OpenTelemetry must be installed."""
    try:
        on = env_flag("RQUEUE_OTEL") if otel is None else otel
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if on and importlib.util.find_spec("opentelemetry") is None:
        raise click.UsageError(
            "--otel (or RQUEUE_OTEL) needs OpenTelemetry: pip install 'rqueue[otel]'"
        )
    return on


def _warn_of_unknown_queues(config: Config, names: tuple[str, ...]) -> None:
    """Say at start that a queue is unknown, so a typo (``rqueue work emial``) does not
    wait in silence for ever. Unknown: no task of the ``-A`` modules (imported by now)
    is declared on it, it is not in the set of queues producers and workers have named,
    and no data in Redis names it. Only a warning: starting workers before the first
    dispatch to a new queue is legitimate. Not said while Redis is unavailable (a
    cluster's failover under way): a warning must not stop the worker, whose parent
    says at once if Redis cannot be reached at all, and rides out an outage after.
    """
    queue = RedisQueue(config)
    try:
        unknown, known = unknown_queues(queue, names, declared_queues())
    except REDIS_ERRORS:  # an unreachable Redis is the parent's one line (its PING)
        return
    finally:
        queue.client.close()
    if unknown:
        logging.getLogger("rqueue.worker").warning(
            "unknown queue %s: nothing was ever pushed to it and it is empty (a typo?); "
            "known queues: %s. Waiting for tasks anyway.",
            ", ".join(unknown),
            shown(", ".join(known) or "none"),
        )
