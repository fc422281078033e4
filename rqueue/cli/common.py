"""The ``rqueue`` group and what every command shares.

Every command that talks to Redis takes ``--redis-url`` and ``--prefix`` (or
``REDIS_URL`` and ``RQUEUE_PREFIX``) through :func:`connection_options`, which is
also where errors become exit codes: bad options are usage errors (exit 2); an
unreachable Redis is one clear line and exit 1, never a traceback.

The command modules import this one; it imports none of them (``__init__`` adds
them to :data:`main`), so there is no import circle.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
import redis

from rqueue.config import Config
from rqueue.errors import InvalidQueueName, RQueueError

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rqueue")
def main() -> None:
    """rqueue: a Laravel-style task queue on Redis."""


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
            die(f"cannot log in to Redis at {config.redacted_url()}: {exc}")
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            die(f"cannot reach Redis at {config.redacted_url()}: {exc}")
        except redis.ResponseError as exc:
            die(f"Redis at {config.redacted_url()} refused: {exc}")
        except RQueueError as exc:  # before ValueError: several of them are ValueErrors too
            die(str(exc))
        except ValueError as exc:
            if "Redis URL" in str(exc) or "scheme" in str(exc):
                raise click.UsageError(f"invalid --redis-url: {exc}") from None
            raise

    return wrapper  # type: ignore[return-value]


def die(message: str) -> NoReturn:
    """Print ``rqueue: MESSAGE`` to stderr and exit 1: a failure, not a usage error."""
    click.echo(f"rqueue: {message}", err=True)
    sys.exit(1)


def table(headers: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Print rows in columns as wide as their widest cell, or ``(none)`` under the headers."""
    cells = [tuple(str(c) for c in headers)] + [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        click.echo("(none)")
