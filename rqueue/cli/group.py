"""The ``rqueue`` command: a thin layer over the Python API.

Every command takes ``--redis-url`` and ``--prefix`` (or ``REDIS_URL`` and
``RQUEUE_PREFIX``). Bad options are usage errors (exit 2); an unreachable Redis is
one clear line and exit 1, never a traceback.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import click
import redis

from rqueue.config import Config
from rqueue.errors import InvalidQueueName, RQueueError
from rqueue.failed import FailedTask, FailedTasks
from rqueue.store.keys import validate_queue_name
from rqueue.store.queue import RedisQueue
from rqueue.worker import logs
from rqueue.worker.options import WorkerOptions

F = TypeVar("F", bound=Callable[..., Any])


def connection_options(command: F) -> F:
    """Add ``--redis-url``/``--prefix`` and turn connection failures into one line."""

    @click.option("--redis-url", envvar="REDIS_URL", help="Redis URL [env: REDIS_URL].")
    @click.option("--prefix", envvar="RQUEUE_PREFIX", help="Key prefix [env: RQUEUE_PREFIX].")
    @functools.wraps(command)
    def wrapper(*args: Any, redis_url: str | None, prefix: str | None, **kwargs: Any) -> Any:
        try:
            config = Config.resolve(redis_url=redis_url, prefix=prefix)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        try:
            redis.ConnectionPool.from_url(config.redis_url)  # parses only, connects nothing
        except ValueError as exc:  # a bad scheme, port or database number
            raise click.UsageError(f"invalid --redis-url: {exc}") from None
        try:
            return command(*args, config=config, **kwargs)
        except InvalidQueueName as exc:  # also a ValueError: caught before the clause below
            raise click.UsageError(str(exc)) from None
        except redis.AuthenticationError as exc:
            _die(f"cannot log in to Redis at {config.redacted_url()}: {exc}")
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            _die(f"cannot reach Redis at {config.redacted_url()}: {exc}")
        except redis.ResponseError as exc:
            _die(f"Redis at {config.redacted_url()} refused: {exc}")
        except RQueueError as exc:  # before ValueError: several of them are ValueErrors too
            _die(str(exc))
        except ValueError as exc:
            if "Redis URL" in str(exc) or "scheme" in str(exc):
                raise click.UsageError(f"invalid --redis-url: {exc}") from None
            raise

    return wrapper  # type: ignore[return-value]


def _die(message: str) -> None:
    click.echo(f"rqueue: {message}", err=True)
    sys.exit(1)


def _queue_list(value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(","))
    try:
        return tuple(validate_queue_name(n) for n in names)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rqueue")
def main() -> None:
    """rqueue: a Laravel-style task queue on Redis."""


@main.command()
@click.argument("queues", default="default")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.001),
    default=60.0,
    show_default=True,
    help="Seconds a task may run unless it sets its own timeout.",
)
@click.option(
    "-c",
    "--concurrency",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Child processes running tasks.",
)
@click.option(
    "--tries",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Attempts a task gets unless it sets its own tries.",
)
@click.option(
    "--sleep",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Seconds between polls when --block-for is 0.",
)
@click.option(
    "--block-for",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Seconds an idle child blocks waiting for a push (0: poll with --sleep).",
)
@click.option("--once", is_flag=True, help="Process one task, then exit.")
@click.option("--stop-when-empty", is_flag=True, help="Exit 0 once no task is ready or running.")
@click.option(
    "--max-jobs", type=click.IntRange(min=0), default=0, help="Stop after this many tasks."
)
@click.option(
    "--max-time", type=click.FloatRange(min=0), default=0.0, help="Stop after this many seconds."
)
@click.option(
    "--memory",
    type=click.IntRange(min=0),
    default=0,
    help="Recycle a child whose RSS exceeds this many MB.",
)
@click.option(
    "--rest", type=click.FloatRange(min=0), default=0.0, help="Seconds to rest after each task."
)
@click.option(
    "--prefetch",
    type=click.IntRange(1, 1000),
    default=100,
    show_default=True,
    help="Most tasks a child reserves at once when the queue is deep.",
)
@click.option(
    "--kill-grace",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Seconds past a task's timeout before its child is killed.",
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


@main.command()
@click.argument("queues", nargs=-1)
@connection_options
def size(config: Config, queues: tuple[str, ...]) -> None:
    """Show ready, delayed, reserved and failed counts of QUEUES (default: all known)."""
    queue = RedisQueue(config)
    names = [validate_queue_name(q) for q in queues] or queue.known_queues()
    rows = [(s.name, s.ready, s.delayed, s.reserved, s.failed) for s in queue.sizes(names)]
    _table(("queue", "ready", "delayed", "reserved", "failed"), rows)


@main.command()
@click.argument("queue_name", metavar="QUEUE")
@connection_options
def clear(config: Config, queue_name: str) -> None:
    """Delete every ready, delayed and reserved task of QUEUE (failed ones stay)."""
    deleted = RedisQueue(config).clear(validate_queue_name(queue_name))
    click.echo(f"Cleared {deleted} task(s) from queue {queue_name}.")


@main.command()
@connection_options
def restart(config: Config) -> None:
    """Ask every running worker to reload after its current tasks."""
    RedisQueue(config).request_restart(time.time())
    click.echo("Restart requested: workers reload after their current tasks.")


@main.group()
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
    _table(("id", "queue", "task", "attempts", "failed at", "error"), rows)


@failed.command("show")
@click.argument("task_id")
@connection_options
def failed_show(config: Config, task_id: str) -> None:
    """Show everything recorded about one failed task."""
    found = _find(FailedTasks(RedisQueue(config)), task_id)
    job = found.job()
    click.echo(f"id:        {found.id}\nqueue:     {found.queue}\ntask:      {found.task or '-'}")
    if job is not None:
        click.echo(f"args:      {list(job.args)!r}\nkwargs:    {job.kwargs!r}")
        if job.meta:
            click.echo(f"meta:      {job.meta!r}")
    else:
        click.echo(f"payload:   {found.payload[:200]!r}")
    click.echo(
        f"attempts:  {found.attempts}\nfailed at: {_when(found.failed_at)}\n"
        f"worker:    {found.host} pid {found.pid}\n"
        f"timed out: {'yes' if found.timed_out else 'no'}\n"
        f"error:     {found.exception}: {found.message}"
    )
    if found.traceback:
        click.echo(f"\n{found.traceback.rstrip()}")


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
        click.echo(f"Retried {failed_tasks.retry_all(queues or None)} failed task(s).")
        return
    for task_id in task_ids:
        found = _find(failed_tasks, task_id)
        failed_tasks.retry(found)
        click.echo(f"Retried {found.id} on queue {found.queue}.")


@failed.command("forget")
@click.argument("task_id")
@connection_options
def failed_forget(config: Config, task_id: str) -> None:
    """Delete one failed task."""
    failed_tasks = FailedTasks(RedisQueue(config))
    found = _find(failed_tasks, task_id)
    failed_tasks.forget(found)
    click.echo(f"Forgot failed task {found.id}.")


@failed.command("flush")
@click.option("--queue", "queues", multiple=True, help="Only this queue (repeatable).")
@connection_options
def failed_flush(config: Config, queues: tuple[str, ...]) -> None:
    """Delete every failed task."""
    click.echo(f"Flushed {FailedTasks(RedisQueue(config)).flush(queues or None)} failed task(s).")


@main.command()
@click.option("--port", type=click.IntRange(1, 65535), default=6379, show_default=True)
@click.option(
    "--dir",
    "data_dir",
    type=click.Path(file_okay=False),
    default=".rqueue/redis",
    show_default=True,
    help="Where Redis keeps its append-only file.",
)
def server(port: int, data_dir: str) -> None:
    """Run an embedded redis-server for development (Ctrl-C stops it)."""
    from rqueue.server import RedisServer, RedisServerError

    instance = RedisServer(port, data_dir, persistent=True)
    try:
        instance.start()
    except RedisServerError as exc:
        _die(str(exc))
    click.echo(f"Redis ready at {instance.url} (data in {data_dir}); Ctrl-C to stop.")

    def stop_on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # `kill` must not orphan the redis-server: SIGTERM stops it like Ctrl-C does.
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        assert instance.process is not None
        instance.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        instance.stop()


@main.command()
@click.option(
    "--tasks",
    "count",
    type=click.IntRange(1, 100_000),
    default=200,
    show_default=True,
    help="How many quick tasks to dispatch besides the showcase ones.",
)
@click.option("--concurrency", type=click.IntRange(min=1), default=2, show_default=True)
def demo(count: int, concurrency: int) -> None:
    """Run the end-to-end demo (on an embedded Redis unless REDIS_URL is set)."""
    from rqueue.cli.demo import run_demo

    sys.exit(run_demo(count, concurrency))


def _find(failed_tasks: FailedTasks, task_id: str) -> FailedTask:
    found = failed_tasks.find(task_id)
    if found is None:
        _die(f"no failed task with id {task_id}")
        raise AssertionError  # unreachable: _die exits
    return found


def _table(headers: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    cells = [tuple(str(c) for c in headers)] + [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        click.echo("(none)")


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


import rqueue.cli.schedule  # noqa: E402, F401  (registers `schedule ...` and `cancel`)
