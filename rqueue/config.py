"""Connection settings, resolved once and passed down explicitly.

Precedence is the one every twelve-factor tool uses: an explicit argument, then the
environment, then the default. Nothing here is mutable after resolution, so a worker
and its forked children can never disagree about where their queues live.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, TypeVar

from rqueue.errors import RQueueError
from rqueue.text import redact

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024

T = TypeVar("T")


class ConfigError(RQueueError, ValueError):
    """A setting that is not a number, or outside its range; the message names it.

    A ``ValueError`` too, so the command line reports it as a usage error (exit 2).
    """


class Limit(NamedTuple):
    """The valid range of one numeric setting: the one rule every option and variable obeys.

    ``low <= value <= high`` is false for NaN as well as for values out of range, so
    ``inf``, ``nan`` and ``1e300`` are refused where they were given, by name, instead of
    overflowing a timer or a Redis score later, far from there.
    """

    low: float
    high: float
    whole: bool = False
    """Only integers (``True`` is not one)."""
    unit: str = ""

    def check(self, setting: str, value: T) -> T:
        """``value`` itself if it is in range, else :class:`ConfigError` naming ``setting``."""
        kinds = (int,) if self.whole else (int, float)
        if (
            isinstance(value, bool)
            or not isinstance(value, kinds)
            or not self.low <= value <= self.high
        ):
            kind = "a whole number" if self.whole else "a number"
            unit = f" {self.unit}" if self.unit else ""
            raise ConfigError(
                f"{setting} must be {kind} from {self.low} to {self.high}{unit}, not {value!r}"
            )
        return value

    def parse(self, setting: str, text: str) -> Any:
        """The number ``text`` spells, checked; a word is refused with the same message."""
        value: object = text
        with contextlib.suppress(ValueError):
            value = int(text) if self.whole else float(text)
        return self.check(setting, value)


LIMITS: Mapping[str, tuple[str | None, Limit]] = {
    "max_payload_bytes": (
        "RQUEUE_MAX_PAYLOAD_BYTES",
        Limit(1, 512 * 1024 * 1024, whole=True, unit="bytes"),
    ),
    "socket_timeout": ("RQUEUE_SOCKET_TIMEOUT", Limit(0.1, 3600, unit="seconds")),
    "dispatch_retry": (None, Limit(0, 3600, unit="seconds")),
}
"""Each numeric field of :class:`Config`: its environment variable, if any, and range.
512 MiB is the largest string Redis stores."""

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class Config:
    """Where Redis is and how rqueue names its keys there."""

    redis_url: str = field(default=DEFAULT_REDIS_URL, repr=False)
    """Not in ``repr``: it may hold a password (see :meth:`redacted_url`)."""
    prefix: str = ""
    cluster: bool = False
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    ssl_ca_certs: str | None = None
    socket_timeout: float = 5.0
    secret: str | None = field(default=None, repr=False)
    """``RQUEUE_SECRET``: sign every payload and refuse unsigned ones (see docs/security.md)."""
    dispatch_retry: float = 2.0
    """Seconds a dispatch keeps retrying an unreachable Redis before QueueConnectionError."""

    @classmethod
    def resolve(
        cls,
        redis_url: str | None = None,
        prefix: str | None = None,
        **overrides: Any,
    ) -> Config:
        """Build a config from arguments, then ``REDIS_URL``/``RQUEUE_*``, then defaults."""
        env = os.environ
        config = cls(
            redis_url=redis_url
            or env.get("REDIS_URL")
            or read_url_file(env.get("REDIS_URL_FILE"), "REDIS_URL_FILE")
            or DEFAULT_REDIS_URL,
            prefix=prefix if prefix is not None else env.get("RQUEUE_PREFIX", ""),
            cluster=_flag(env, "RQUEUE_CLUSTER"),
            ssl_ca_certs=env.get("RQUEUE_SSL_CA_CERTS") or None,
            secret=env.get("RQUEUE_SECRET") or None,
            **{
                name: limit.parse(variable, env[variable])
                for name, (variable, limit) in LIMITS.items()
                if variable and env.get(variable)  # unset or empty: the default
            },
        )
        return replace(config, **{k: v for k, v in overrides.items() if v is not None})

    def __post_init__(self) -> None:
        # A Config built in code is checked too, by field name (resolve() has already
        # checked the variables, by their names).
        for name, (_, limit) in LIMITS.items():
            limit.check(name, getattr(self, name))

    def redacted_url(self) -> str:
        """The URL with any password hidden, fit for logs and error messages."""
        return redact(self.redis_url)


def _flag(env: Mapping[str, str], variable: str) -> bool:
    """An on/off variable; a value that is neither (``RQUEUE_CLUSTER=cluster``) is refused
    rather than read as off."""
    value = env.get(variable, "").strip().lower()
    if value not in _TRUE + _FALSE:
        raise ConfigError(
            f"{variable} must be one of {', '.join(_TRUE + _FALSE[1:])} or empty, "
            f"not {env[variable]!r}"
        )
    return value in _TRUE


def read_url_file(path: str | None, source: str) -> str | None:
    """The Redis URL kept in the file at ``path`` (its first line), or None without a path.

    A URL in a file (or in ``REDIS_URL``) stays out of the command line, which ``ps``
    shows every user of the machine. ``source`` (the option or variable that named the
    file) starts each error message, so a bad value is traced to where it was set.
    """
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            url = file.readline().strip()
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read {path}: {exc.strerror or exc}") from None
    if not url:
        raise ConfigError(f"{source}: {path} is empty; it should hold the Redis URL")
    return url
