"""Opening a Redis client from a :class:`~rqueue.settings.config.Config`.

Every connection rqueue makes starts here, so how it talks to Redis (timeouts, no
silent retries, TLS, which replies count as an outage) is decided in one place, for
one server, each node of a Redis Cluster (``cluster.py``) and the master Sentinel
names (``sentinel.py``) alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from rqueue.settings.config import Config, ConfigError
from rqueue.store.cluster import ClusterClient, SlotMap
from rqueue.store.retry import ROLE_CHANGES, RedisUnavailable, transient_reply
from rqueue.store.sentinel import locator, sentinel_managed


@functools.cache
def _outage_aware_parser(parser: type) -> type:
    """``parser`` (redis-py's choice for the protocol), with transient error replies
    turned into RedisUnavailable: every reply of every connection (the pool, pipelines
    and the hot path's Wire) is parsed there, so no caller can miss one (retry.py)."""

    class OutageAware(parser):  # type: ignore[misc]
        @classmethod
        def parse_error(cls, response: str) -> Exception:
            transient = transient_reply(response)
            if transient is not None:
                return RedisUnavailable(transient)
            error: Exception = super().parse_error(response)
            return error

    return OutageAware


@functools.cache
def _reconnecting(connection: type) -> type:
    """``connection``, reopened before its next command once Redis said it is not the
    master (ROLE_CHANGES). After a failover behind one address (DNS, a proxy) the new
    master is only found by connecting again; a connection kept open would be refused
    forever. Not at once: a pipeline is still reading the replies after that one."""

    class Reconnecting(connection):  # type: ignore[misc]
        _stale = False

        def read_response(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().read_response(*args, **kwargs)
            except RedisUnavailable as exc:
                self._stale = self._stale or exc.code in ROLE_CHANGES
                raise

        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            if self._stale:
                self._stale = False
                self.disconnect()
            super().send_packed_command(command, check_health)

    return Reconnecting


def connect(config: Config) -> redis.Redis:
    """Open a client for the topology the config names; bytes in, bytes out, since
    payloads are msgpack. Nothing is sent until it is used."""
    target = config.target
    if config.cluster:
        seeds = target.hosts or [_address(node_client(config))]
        return ClusterClient(SlotMap(seeds, lambda host, port: node_client(config, (host, port))))
    if target.kind == "sentinel":
        master = locator(target, _options(config), lambda node: node_client(config, node))
        return node_client(config, routed=lambda connection: sentinel_managed(connection, master))
    return node_client(config)


def node_client(
    config: Config,
    address: tuple[str, int] | None = None,
    routed: Callable[[type], type] | None = None,
) -> redis.Redis:
    """A client of one server: the URL's, or the node at ``address`` with the URL's
    credentials, database and TLS settings (a cluster's nodes), or wherever
    ``routed`` connections find it (Sentinel's master)."""
    client = redis.Redis.from_url(config.target.node_url, **_options(config))
    pool = client.connection_pool
    if address is not None:
        pool.connection_kwargs.update(host=address[0], port=address[1])
    # The parser redis-py picks depends on its version, hiredis and the protocol:
    # ask a connection object (it opens no socket) which one, and wrap that.
    chosen: type = type(pool.connection_class(**pool.connection_kwargs)._parser)
    pool.connection_kwargs["parser_class"] = _outage_aware_parser(chosen)
    connection: type = pool.connection_class
    pool.connection_class = _reconnecting(routed(connection) if routed else connection)
    return client


def _options(config: Config) -> dict[str, Any]:
    options: dict[str, Any] = {
        "socket_timeout": config.socket_timeout,
        "socket_connect_timeout": config.socket_timeout,
        "health_check_interval": 0,
        # No silent retries inside redis-py: re-sending a push or a reserve after a
        # timeout can run it twice. rqueue retries where it knows that is safe.
        "retry": Retry(NoBackoff(), 0),
    }
    if config.target.tls and config.ssl_ca_certs:
        options["ssl_ca_certs"] = config.ssl_ca_certs
    return options


def _address(client: redis.Redis) -> tuple[str, int]:
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        raise ConfigError("Redis Cluster is reached over TCP: a unix:// URL cannot name it")
    if int(kwargs.get("db") or 0):
        raise ConfigError("a Redis Cluster has only database 0: end the Redis URL with /0")
    return str(kwargs.get("host", "localhost")), int(kwargs.get("port", 6379))
