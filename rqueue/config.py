"""Connection settings, resolved once and passed down explicitly.

Precedence is the one every twelve-factor tool uses: an explicit argument, then the
environment, then the default. Nothing here is mutable after resolution, so a worker
and its forked children can never disagree about where their queues live.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Config:
    """Where Redis is and how rqueue names its keys there."""

    redis_url: str = DEFAULT_REDIS_URL
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
            redis_url=redis_url or env.get("REDIS_URL") or DEFAULT_REDIS_URL,
            prefix=prefix if prefix is not None else env.get("RQUEUE_PREFIX", ""),
            cluster=env.get("RQUEUE_CLUSTER", "") in ("1", "true", "yes"),
            max_payload_bytes=int(env.get("RQUEUE_MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES)),
            ssl_ca_certs=env.get("RQUEUE_SSL_CA_CERTS") or None,
            secret=env.get("RQUEUE_SECRET") or None,
            socket_timeout=float(env.get("RQUEUE_SOCKET_TIMEOUT") or 5.0),
        )
        return replace(config, **{k: v for k, v in overrides.items() if v is not None})

    def redacted_url(self) -> str:
        """The URL with any password hidden, fit for logs and error messages."""
        scheme, sep, rest = self.redis_url.partition("://")
        if "@" not in rest:
            return self.redis_url
        credentials, _, host = rest.rpartition("@")
        user = credentials.split(":", 1)[0]
        return f"{scheme}{sep}{user + ':' if user else ':'}***@{host}"
