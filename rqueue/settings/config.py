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
from functools import cached_property
from typing import Any, NamedTuple, TypeVar

from rqueue.encoding.sealing import KEYS_SETTING, Keyring, parse_keys
from rqueue.errors import RQueueError
from rqueue.settings.redis_url import RedisTarget, parse_redis_url, redact_url
from rqueue.text import redact

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
DEFAULT_MAX_RESULT_BYTES = 16 * 1024 * 1024
"""A kept result's record is written by the ack and held until it expires: larger than
a payload may be, but bounded (see docs/workflows.md, Results)."""
DEFAULT_MAX_BATCH_RESULTS_BYTES = 64 * 1024 * 1024
"""The members' results a batch keeps for a callback that gets them (``results=True``):
that callback's worker holds them all in memory at once (see docs/workflows.md)."""
DISPATCH_RETRY = 2.0
"""Seconds a dispatch retries an unreachable single Redis: a restart, a blip."""
DISPATCH_RETRY_FAILOVER = 20.0
"""The same on Cluster and Sentinel: long enough to ride out a failover, which takes
cluster-node-timeout (or down-after-milliseconds) plus an election: a few seconds
when those are tuned low, 15 to 30 with Redis's defaults (see docs/deployment.md)."""

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


MAX_EVENTS = 10_000_000
"""The most events a queue's stream may be asked to keep: more is taken for a mistake."""
EVENTS_LENGTH = Limit(1, MAX_EVENTS, whole=True, unit="events")
"""A queue's stream length as ``--events-length`` and a pool's ``events_length`` take it."""

LIMITS: Mapping[str, tuple[str | None, Limit]] = {
    "max_payload_bytes": (
        "RQUEUE_MAX_PAYLOAD_BYTES",
        Limit(1, 512 * 1024 * 1024, whole=True, unit="bytes"),
    ),
    "max_result_bytes": (
        "RQUEUE_MAX_RESULT_BYTES",
        Limit(1, 512 * 1024 * 1024, whole=True, unit="bytes"),
    ),
    "max_batch_results_bytes": (
        "RQUEUE_MAX_BATCH_RESULTS_BYTES",
        Limit(1, 16 * 1024**3, whole=True, unit="bytes"),
    ),
    "socket_timeout": ("RQUEUE_SOCKET_TIMEOUT", Limit(0.1, 3600, unit="seconds")),
    "dispatch_retry": ("RQUEUE_DISPATCH_RETRY", Limit(0, 3600, unit="seconds")),
    "wait_replicas": ("RQUEUE_WAIT_REPLICAS", Limit(0, 1000, whole=True, unit="replicas")),
    "wait_replicas_timeout": ("RQUEUE_WAIT_REPLICAS_TIMEOUT", Limit(0.001, 3600, unit="seconds")),
    "events": ("RQUEUE_EVENTS", Limit(0, MAX_EVENTS, whole=True, unit="events")),
}
"""Each numeric field of :class:`Config`: its environment variable, if any, and range.
512 MiB is the largest string Redis stores."""

FLAGS: Mapping[str, bool] = {
    **dict.fromkeys(("1", "true", "yes", "on"), True),
    **dict.fromkeys(("0", "false", "no", "off"), False),
}
"""What an on/off environment variable may say (any case, spaces around ignored)."""


@dataclass(frozen=True)
class Config:
    """Where Redis is and how rqueue names its keys there."""

    redis_url: str = field(default=DEFAULT_REDIS_URL, repr=False)
    """Not in ``repr``: it may hold a password (see :meth:`redacted_url`)."""
    prefix: str = ""
    cluster: bool = False
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    """A kept result's encoded record, at most (ResultTooLarge fails the task)."""
    max_batch_results_bytes: int = DEFAULT_MAX_BATCH_RESULTS_BYTES
    """The encoded results of one batch's members, together, at most, for a callback
    that gets them: the member over it fails (ResultTooLarge)."""
    ssl_ca_certs: str | None = None
    socket_timeout: float = 5.0
    secret: str | None = field(default=None, repr=False)
    """``RQUEUE_SECRET``: sign every payload and refuse unsigned ones (see docs/security.md)."""
    dispatch_retry: float | None = None
    """Seconds a dispatch keeps retrying an unreachable Redis before QueueConnectionError;
    None: :data:`DISPATCH_RETRY`, or :data:`DISPATCH_RETRY_FAILOVER` on Cluster and
    Sentinel (see :attr:`dispatch_retry_seconds`)."""
    wait_replicas: int = 0
    """After each dispatch, wait until this many replicas have the task (Redis ``WAIT``),
    so a failover right after cannot lose it; 0: do not wait."""
    wait_replicas_timeout: float = 1.0
    """How long a dispatch waits for those replicas before ReplicasNotReached."""
    events: int = 0
    """Record task events in each queue's live event stream, keeping about this many
    (``rqueue work --events``; docs/monitoring.md); 0: record none. Read by the
    worker's scripts; a producer's add ``dispatched`` events while a worker records."""
    encryption_keys: str | None = field(default=None, repr=False)
    """``RQUEUE_ENCRYPTION_KEYS``: comma-separated keys (32 bytes, URL-safe base64 each),
    the first encrypting and all decrypting, for encrypted tasks (docs/security.md)."""
    encrypt_all: bool = False
    """``RQUEUE_ENCRYPT_ALL``: encrypt the arguments of every call dispatched, not only
    those of tasks marked ``encrypted=True``."""

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
            cluster=env_flag("RQUEUE_CLUSTER", env),
            ssl_ca_certs=env.get("RQUEUE_SSL_CA_CERTS") or None,
            secret=env.get("RQUEUE_SECRET") or None,
            encryption_keys=env.get(KEYS_SETTING) or None,
            encrypt_all=env_flag("RQUEUE_ENCRYPT_ALL", env),
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
            if getattr(self, name) is not None:
                limit.check(name, getattr(self, name))
        _ = self.keyring  # a key that is not one is refused here, by its setting's name
        if self.target.kind == "cluster":
            object.__setattr__(self, "cluster", True)  # the URL says so, as the flag would
        elif self.cluster and self.target.kind == "sentinel":
            raise ConfigError(
                "RQUEUE_CLUSTER is set but the Redis URL names a Sentinel service; "
                "a cluster is named by redis:// or redis+cluster:// instead"
            )

    @cached_property
    def target(self) -> RedisTarget:
        """Where the URL points: one server, a cluster's seed nodes, or a Sentinel service."""
        try:
            return parse_redis_url(self.redis_url)
        except ValueError as exc:
            raise ConfigError(redact(f"invalid Redis URL: {exc}")) from None

    @cached_property
    def keyring(self) -> Keyring | None:
        """The encryption keys, parsed once; None without any."""
        if not self.encryption_keys:
            if self.encrypt_all:
                raise ConfigError(
                    f"RQUEUE_ENCRYPT_ALL is on but {KEYS_SETTING} is not set: there is no key "
                    "to encrypt with (`rqueue key generate` makes one)"
                )
            return None
        try:
            return Keyring(parse_keys(self.encryption_keys), self.encrypt_all)
        except ValueError as exc:
            raise ConfigError(f"{KEYS_SETTING}: {exc}") from None

    @property
    def dispatch_retry_seconds(self) -> float:
        if self.dispatch_retry is not None:
            return self.dispatch_retry
        failover = self.cluster or self.target.kind == "sentinel"
        return DISPATCH_RETRY_FAILOVER if failover else DISPATCH_RETRY

    def redacted_url(self) -> str:
        """The URL with anything that could be a password hidden, fit for logs and
        error messages (the whole URL is known to be one, so more is caught than
        :func:`~rqueue.text.redact` can in free text: a space in a password)."""
        return redact_url(self.redis_url)


def env_flag(variable: str, env: Mapping[str, str] | None = None) -> bool:
    """The on/off environment variable ``variable``; unset or empty is off.

    The one reader of every boolean variable rqueue reads (``RQUEUE_SYNC``,
    ``RQUEUE_CLUSTER``): a value not in :data:`FLAGS` is a ConfigError naming the
    variable and the values accepted, never guessed. Reading "set" as on turned sync
    mode on with ``RQUEUE_SYNC=false``; reading a typo as off hides it.
    """
    given = (os.environ if env is None else env).get(variable, "")
    value = given.strip().lower()
    if value and value not in FLAGS:
        raise ConfigError(
            f"{variable} must be one of {'/'.join(FLAGS)} (any case) or empty, not {given!r}"
        )
    return FLAGS.get(value, False)


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
