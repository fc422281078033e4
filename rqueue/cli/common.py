"""The ``rqueue`` group and what every command shares.

Every command that talks to Redis takes ``--redis-url`` or ``--redis-url-file`` and
``--prefix`` (or ``REDIS_URL``, ``REDIS_URL_FILE`` and ``RQUEUE_PREFIX``) through
:func:`connection_options`, which is also where errors become exit codes: bad options
are usage errors (exit 2) that name where the value came from; an unreachable Redis
is one clear line and exit 1, never a traceback.

Everything printed goes through :func:`say`, :func:`table` or :func:`die`, which pass
it through :func:`rqueue.text.shown`: much of it (task names, messages, tracebacks,
queue and host names) was read from Redis or written by task code, so it is escaped
for the terminal and any credential in it is masked, in this one place.

The command modules import this one; it imports none of them (``__init__`` adds
them to :data:`main`), so there is no import circle.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
from collections.abc import Callable, Collection, Sequence
from typing import Any, NoReturn, TypeVar

import click
import redis

from rqueue.errors import InvalidQueueName, RQueueError, describe
from rqueue.settings.config import Config, ConfigError, read_url_file
from rqueue.settings.redis_url import parse_redis_url
from rqueue.store.keys import validate_queue_name
from rqueue.store.queue import RedisQueue
from rqueue.tasks.decorator import registered
from rqueue.tasks.options import TaskOptions
from rqueue.text import shown
from rqueue.timing import moment as moment  # every time a command prints

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rqueue")
def main() -> None:
    """rqueue: a Laravel-style task queue on Redis."""


def log_options(command: F) -> F:
    """Add ``--log-level`` and ``--log-format``: the options of the commands that run
    for long and log (``work``, ``supervise``)."""
    command = click.option(
        "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True
    )(command)
    return click.option(
        "--log-level",
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        default="INFO",
        show_default=True,
    )(command)


def connection_options(command: F) -> F:
    """Add ``--redis-url``/``--prefix`` and turn connection failures into one line."""

    @click.option(
        "--redis-url",
        envvar="REDIS_URL",
        help="Redis URL [env: REDIS_URL]. With a password, prefer the variable or "
        "--redis-url-file: any user can read a command line with ps.",
    )
    @click.option(
        "--redis-url-file",
        envvar="REDIS_URL_FILE",
        metavar="PATH",
        help="Read the Redis URL from the first line of this file [env: REDIS_URL_FILE].",
    )
    @click.option("--prefix", envvar="RQUEUE_PREFIX", help="Key prefix [env: RQUEUE_PREFIX].")
    @functools.wraps(command)
    def wrapper(
        *args: Any,
        redis_url: str | None,
        redis_url_file: str | None,
        prefix: str | None,
        **kwargs: Any,
    ) -> Any:
        try:
            redis_url, source = _redis_url(redis_url, redis_url_file)
        except ValueError as exc:
            raise click.UsageError(shown(exc)) from None
        try:
            if redis_url:  # parsed only, nothing connected: a bad scheme, port or database
                redis.ConnectionPool.from_url(parse_redis_url(redis_url).node_url)
        except ValueError as exc:
            raise click.UsageError(shown(f"invalid {source}: {exc}")) from None
        try:
            config = Config.resolve(redis_url=redis_url, prefix=prefix)
        except ValueError as exc:
            raise click.UsageError(shown(exc)) from None
        try:
            return command(*args, config=config, **kwargs)
        except (InvalidQueueName, ConfigError) as exc:  # a name or setting the command refused
            raise click.UsageError(shown(exc)) from None
        except redis.AuthenticationError as exc:
            die(f"cannot log in to Redis at {config.redacted_url()}: {exc}")
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            die(f"cannot reach Redis at {config.redacted_url()}: {exc}")
        except redis.ResponseError as exc:
            die(f"Redis at {config.redacted_url()} refused: {exc}")
        except RQueueError as exc:  # before ValueError: several of them are ValueErrors too
            die(str(exc))
        except ValueError as exc:
            if "Redis URL" in str(exc) or "scheme" in str(exc):
                raise click.UsageError(shown(f"invalid {source}: {exc}")) from None
            raise

    return wrapper  # type: ignore[return-value]


def _redis_url(url: str | None, url_file: str | None) -> tuple[str | None, str]:
    """The Redis URL given, if any, and where it came from, to name in an error about it.

    The command line beats the environment; at the same level a URL beats a file.
    """
    context = click.get_current_context()
    env = click.core.ParameterSource.ENVIRONMENT
    url_from_env = context.get_parameter_source("redis_url") is env
    file_from_env = context.get_parameter_source("redis_url_file") is env
    if url and (not url_file or url_from_env <= file_from_env):
        return url, "REDIS_URL (from the environment)" if url_from_env else "--redis-url"
    if url_file:
        where = "REDIS_URL_FILE (from the environment)" if file_from_env else "--redis-url-file"
        return read_url_file(url_file, where), f"{where} (the URL in {url_file})"
    return None, "the default Redis URL"


def say(text: object, multiline: bool = False, err: bool = False) -> None:
    """Print ``text`` escaped and redacted (see the module's docstring); with
    ``multiline`` its newlines stay (a traceback), else they print as ``\\n``."""
    click.echo(shown(text, multiline), err=err)


def die(message: str) -> NoReturn:
    """Print ``rqueue: MESSAGE`` to stderr and exit 1: a failure, not a usage error."""
    say(f"rqueue: {message}", err=True)
    sys.exit(1)


def table(headers: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Print rows in columns as wide as their widest cell, or ``(none)`` under the headers.

    Every cell is escaped, so a row stays one line whatever came from Redis.
    """
    cells = [tuple(shown(c) for c in headers)] + [tuple(shown(c) for c in row) for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        click.echo("(none)")


def queue_list(value: str) -> tuple[str, ...]:
    """QUEUES (comma-separated) as checked names, so a bad one is a usage error (exit 2),
    not a traceback."""
    names = tuple(n.strip() for n in value.split(","))
    try:
        return tuple(validate_queue_name(n) for n in names)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def finite_seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Seconds, 0 or more and finite (an option's callback, with ``type=float``):
    click's FloatRange lets ``nan`` through (no comparison with it is true), and an
    alert on ``--max-wait nan`` would never fire."""
    if value is not None and not 0 <= value < math.inf:
        raise click.BadParameter(f"{value!r} is not a finite number of seconds from 0")
    return value


def declared_queues() -> set[str]:
    """The queues this process's tasks are declared on (``@task(queue=...)``, imported
    by then: a worker's ``-A`` modules), and ``default``, that of every other task."""
    return {TaskOptions.queue} | {task.options.queue for task in registered().values()}


def unknown_queues(
    queue: RedisQueue, names: Sequence[str], declared: Collection[str] = ()
) -> tuple[list[str], list[str]]:
    """Those of ``names`` that nothing names (a typo, most likely: ``emial``), and the
    known queues. Named: by a task of ``declared`` (see :func:`declared_queues`), in the
    registry producers and workers add to, or by data in Redis (tasks ready, delayed,
    reserved or failed, a pause, a schedule firing into it). Worth a warning, not an
    error: naming a queue before its first task is legitimate."""
    known = queue.known_queues()
    candidates = [
        size
        for size in queue.sizes([name for name in names if name not in declared])
        if size.name not in known
        and not (size.ready or size.delayed or size.reserved or size.failed or size.paused)
    ]
    pipe = queue.client.pipeline(transaction=False)
    for size in candidates:
        pipe.exists(queue.keys(size.name).schedules)
    scheduled = pipe.execute() if candidates else []
    unknown = [size.name for size, has in zip(candidates, scheduled, strict=True) if not has]
    return unknown, known


def warn_of_unknown_queues(queue: RedisQueue, names: Sequence[str]) -> None:
    """Print to stderr which of ``names`` no task, registry entry or data names (see
    :func:`unknown_queues`): ``rqueue size emial`` must not answer zeros in silence."""
    unknown, known = unknown_queues(queue, names, declared_queues())
    if unknown:
        say(
            f"Warning: unknown queue {', '.join(unknown)}: nothing was ever pushed to it and "
            f"it is empty (a typo?); known queues: {', '.join(known) or 'none'}.",
            err=True,
        )


def preload_module(module: str) -> None:
    """Import an ``-A`` module here, so that a typo or a module that raises is a usage
    error naming it (exit 2), not a traceback from the worker's parent (or from a
    pool's: ``rqueue supervise --check`` imports the pools' ``app`` modules too)."""
    try:
        found = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        found = None
    if found is None:
        raise click.UsageError(f"-A/--app: no module named {module!r} here or on sys.path")
    try:
        importlib.import_module(module)
    except Exception as exc:
        kind, message = describe(exc)
        raised = f"-A/--app {module}: importing it raised {kind}: {message}"
        raise click.UsageError(shown(raised)) from None
