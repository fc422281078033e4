"""``rqueue schedule ...``: list, add and change recurring schedules, over :class:`Schedules`.

Definitions are read from Redis: every field is printed through ``say``/``table``
(escaped, redacted), never raw.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

import click

from rqueue.cli.common import connection_options, finite_seconds, say, table
from rqueue.metrics.registry import served_queues
from rqueue.schedules.api import Schedules
from rqueue.schedules.record import UNSET, Schedule
from rqueue.settings.config import Config
from rqueue.store.queue import RedisQueue
from rqueue.timing import iso


def _json(kind: type, what: str) -> Any:
    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
        if value is None:
            return None
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not valid JSON: {exc}") from None
        if not isinstance(parsed, kind):
            raise click.BadParameter(f"must be a JSON {what}, got {value!r}")
        return parsed

    return convert


def _moment(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return UNSET
    if value == "":
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise click.BadParameter(f"{value!r} has no time zone: add Z or an offset like +01:00")
    return parsed


@dataclasses.dataclass(frozen=True)
class _Timing:
    """The options ``schedule add`` and ``schedule update`` share, as given.

    None where an option was not given, except ``start`` and ``end``: UNSET when not
    given, None when given as '' (clear it), else the time.
    """

    cron: str | None
    every: float | None
    args_json: list[Any] | None
    kwargs_json: dict[str, Any] | None
    start: Any
    end: Any
    timezone: str | None
    misfire: str | None
    misfire_grace: float | None


def _timing_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the options of :class:`_Timing` and hand their values to COMMAND as ``timing``."""

    @functools.wraps(command)
    def with_timing(**values: Any) -> None:
        given = {field.name: values.pop(field.name) for field in dataclasses.fields(_Timing)}
        command(timing=_Timing(**given), **values)

    for option in reversed(
        [
            click.option("--cron", help='Cron, e.g. "*/5 * * * *" (6 fields: seconds first).'),
            click.option(
                "--every", type=float, callback=finite_seconds, help="Interval in seconds."
            ),
            click.option(
                "--args",
                "args_json",
                callback=_json(list, "array"),
                help="JSON array of arguments.",
            ),
            click.option(
                "--kwargs",
                "kwargs_json",
                callback=_json(dict, "object"),
                help="JSON object of keyword arguments.",
            ),
            click.option(
                "--start", callback=_moment, help="ISO time of the first possible run ('' clears)."
            ),
            click.option(
                "--end", callback=_moment, help="ISO time after which it never fires ('' clears)."
            ),
            click.option("--timezone", help="IANA time zone the cron is read in (default UTC)."),
            click.option(
                "--misfire",
                type=click.Choice(["skip", "all"]),
                help="After an outage: fire once (skip) or every missed trigger (all).",
            ),
            click.option(
                "--misfire-grace",
                type=float,
                callback=finite_seconds,
                help="Seconds late a trigger may be and still count as on time.",
            ),
        ]
    ):
        with_timing = option(with_timing)
    return with_timing


def _schedules(config: Config) -> Schedules:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # TASK names resolve from here, as in `rqueue work`
    return Schedules(RedisQueue(config))


def _window(schedule: Schedule) -> str:
    if schedule.start_ms is None and schedule.end_ms is None:
        return "-"
    start = iso(schedule.start_ms) if schedule.start_ms is not None else "…"
    end = iso(schedule.end_ms) if schedule.end_ms is not None else "…"
    return f"{start}..{end}"


def _describe(schedule: Schedule) -> None:
    say(
        f"{schedule.name}: {schedule.task} on {schedule.queue}, {schedule.describe()}, "
        f"{schedule.state}, next run "
        f"{iso(schedule.next_ms) if schedule.next_ms is not None else '-'}"
    )


@click.group("schedule")
def schedule_group() -> None:
    """List, add and change recurring schedules (every worker fires them, each once)."""


@schedule_group.command("list")
@connection_options
def schedule_list(config: Config) -> None:
    """List schedules: timing, window, next and last run, state (overdue, or on a
    queue no worker serves; unreadable for a record that does not read)."""
    schedules = _schedules(config)
    now = schedules.now_ms()
    served = served_queues(schedules.queue)
    rows = [
        (
            s.name,
            s.task or "-",
            s.describe() + (" (declared in code)" if s.declared else ""),
            _window(s),
            iso(s.next_ms) if s.next_ms is not None else "-",
            iso(s.last_ms) if s.last_ms is not None else "-",
            s.standing(now, served),
        )
        for s in schedules.list()
    ]
    table(("name", "task", "timing", "window", "next run", "last run", "state"), rows)


@schedule_group.command("show")
@click.argument("name")
@click.option("-n", "count", type=click.IntRange(1, 1000), default=5, show_default=True)
@connection_options
def schedule_show(config: Config, name: str, count: int) -> None:
    """Show one schedule and its next COUNT run times."""
    schedule = _schedules(config).get(name)
    _describe(schedule)
    arguments = f"args: {list(schedule.args)!r}  kwargs: {schedule.kwargs!r}"
    if schedule.hidden:  # this process has no key that decrypts them
        arguments = "args: encrypted  kwargs: encrypted"
    say(f"{arguments}  window: {_window(schedule)}  misfire: {schedule.misfire}")
    for run in schedule.next_runs(count):
        say(f"  {iso(round(run.timestamp() * 1000))}")  # the one rule for times shown


@schedule_group.command("add")
@click.argument("name")
@click.argument("task_name", metavar="TASK")
@_timing_options
@click.option("--queue", help="Queue to fire into (default: the task's).")
@click.option("--paused", is_flag=True, help="Create it paused.")
@connection_options
def schedule_add(
    config: Config, name: str, task_name: str, timing: _Timing, queue: str | None, paused: bool
) -> None:
    """Add schedule NAME running TASK (module:function) by --cron or --every."""
    if (timing.cron is None) == (timing.every is None):
        raise click.UsageError("give exactly one of --cron or --every")
    options: dict[str, Any] = {
        "cron": timing.cron,
        "every": timing.every,
        "args": timing.args_json or [],
        "kwargs": timing.kwargs_json or {},
        "queue": queue,
        "timezone": timing.timezone or "UTC",
        "misfire": timing.misfire or "skip",
        "start": None if timing.start is UNSET else timing.start,
        "end": None if timing.end is UNSET else timing.end,
        "paused": paused,
    }
    if timing.misfire_grace is not None:
        options["misfire_grace"] = timing.misfire_grace
    _describe(_schedules(config).add(name, task_name, **options))


@schedule_group.command("update")
@click.argument("name")
@_timing_options
@click.option("--task", "task_name", help="Run this task (module:function) instead.")
@connection_options
def schedule_update(config: Config, name: str, timing: _Timing, task_name: str | None) -> None:
    """Change schedule NAME; running workers use it from their next tick."""
    if timing.cron is not None and timing.every is not None:
        raise click.UsageError("give at most one of --cron or --every")
    given = {
        "cron": timing.cron,
        "every": timing.every,
        "args": timing.args_json,
        "kwargs": timing.kwargs_json,
        "timezone": timing.timezone,
        "misfire": timing.misfire,
        "misfire_grace": timing.misfire_grace,
        "task": task_name,
    }
    changes = {k: v for k, v in given.items() if v is not None}
    start_end = (("start", timing.start), ("end", timing.end))
    changes.update({k: v for k, v in start_end if v is not UNSET})
    if not changes:
        raise click.UsageError("nothing to update: give at least one option")
    _describe(_schedules(config).update(name, **changes))


@schedule_group.command("pause")
@click.argument("name")
@connection_options
def schedule_pause(config: Config, name: str) -> None:
    """Stop firing NAME until resumed."""
    _describe(_schedules(config).pause(name))


@schedule_group.command("resume")
@click.argument("name")
@connection_options
def schedule_resume(config: Config, name: str) -> None:
    """Fire NAME again from its next trigger (missed ones are not caught up)."""
    _describe(_schedules(config).resume(name))


@schedule_group.command("remove")
@click.argument("name")
@connection_options
def schedule_remove(config: Config, name: str) -> None:
    """Delete schedule NAME (tasks it already enqueued stay). One declared in code
    (@task(cron=...)) comes back with the next worker that imports it: it says so."""
    removed = _schedules(config).remove(name)
    note = removed.removal_note if removed is not None else ""
    say(f"Removed schedule {name}; {note}." if note else f"Removed schedule {name}.")


@schedule_group.command("run-now")
@click.argument("name")
@connection_options
def schedule_run_now(config: Config, name: str) -> None:
    """Enqueue one run of NAME now, outside its timeline."""
    task_id = _schedules(config).run_now(name)
    say(f"Enqueued {name} now as task {task_id}.")
