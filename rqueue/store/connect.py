"""Opening a Redis client from a :class:`~rqueue.config.Config`.

Every connection rqueue makes starts here, so how it talks to Redis (timeouts, no
silent retries, TLS) is decided in one place; Cluster and Sentinel clients will be
chosen here too, from the same settings.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from rqueue.config import Config


def connect(config: Config) -> redis.Redis:
    """Open a client; bytes in, bytes out, since payloads are msgpack."""
    options: dict[str, Any] = {
        "socket_timeout": config.socket_timeout,
        "socket_connect_timeout": config.socket_timeout,
        "health_check_interval": 0,
        # No silent retries inside redis-py: re-sending a push or a reserve after a
        # timeout can run it twice. rqueue retries where it knows that is safe.
        "retry": Retry(NoBackoff(), 0),
    }
    if config.redis_url.startswith("rediss://") and config.ssl_ca_certs:
        options["ssl_ca_certs"] = config.ssl_ca_certs
    return redis.Redis.from_url(config.redis_url, **options)
