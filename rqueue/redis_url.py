"""Where Redis is: the three forms of ``REDIS_URL``, read into one :class:`RedisTarget`.

- ``redis://host:6379/0`` (or ``rediss://``, ``unix://``): one server; with
  ``RQUEUE_CLUSTER=1`` any node of a Redis Cluster, the others found from it.
- ``redis+cluster://h1:7000,h2:7001/0``: a Redis Cluster, named by seed nodes, so that
  a client starting while one of them is down still finds the cluster.
- ``redis+sentinel://h1:26379,h2:26379/mymaster/0``: the master Sentinel names
  ``mymaster``. The URL's user and password are the data nodes'; the sentinels' own go
  in ``?sentinel_username=`` and ``?sentinel_password=``, since they are often different.

``rediss+cluster://`` and ``rediss+sentinel://`` use TLS for every connection. Read
here, at layer 0, so a malformed URL is a usage error where it was given (the option or
variable), not a connection error later; the store opens connections from the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

_SINGLE = ("redis", "rediss", "unix")
_CLUSTER = ("redis+cluster", "rediss+cluster")
_SENTINEL = ("redis+sentinel", "rediss+sentinel")
_SENTINEL_CREDENTIALS = ("sentinel_username", "sentinel_password")
DEFAULT_SENTINEL_PORT = 26379
DEFAULT_PORT = 6379


@dataclass(frozen=True)
class RedisTarget:
    """What a Redis URL names: one server, a cluster's seeds, or a Sentinel service."""

    kind: str
    """``single``, ``cluster`` or ``sentinel``."""
    node_url: str
    """A plain ``redis://``/``rediss://`` URL for redis-py: credentials, database, TLS
    and query options of every data connection. Its host is the first node's; on
    Cluster and Sentinel each connection replaces it with the node it needs."""
    hosts: tuple[tuple[str, int], ...] = ()
    """The seed nodes (Cluster) or the sentinels (Sentinel)."""
    service: str = ""
    """The name Sentinel monitors the master under."""
    sentinel_username: str | None = None
    sentinel_password: str | None = None

    @property
    def tls(self) -> bool:
        return self.node_url.startswith("rediss://")


def parse_redis_url(url: str) -> RedisTarget:
    """Read ``url``; ValueError saying what was expected if it is none of the forms."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in (*_SINGLE, *_CLUSTER, *_SENTINEL):
        raise ValueError(
            f"unknown Redis URL scheme {scheme + sep!r}; use redis://, rediss://, "
            "unix://, redis+cluster://host:port,host:port/0 or "
            "redis+sentinel://host:port,host:port/mastername/0"
        )
    if scheme in _SINGLE:
        return RedisTarget("single", url)
    tls = scheme.startswith("rediss")
    parts = urlsplit(f"{'rediss' if tls else 'redis'}://{rest}")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    query = parse_qsl(parts.query, keep_blank_values=True)
    if scheme in _CLUSTER:
        hosts = _hosts(hostlist, DEFAULT_PORT)
        path = parts.path
        if path.strip("/") not in ("", "0"):
            raise ValueError("a Redis Cluster has only database 0: end the URL with /0 or /")
        extra: dict[str, str] = {}
    else:
        hosts = _hosts(hostlist, DEFAULT_SENTINEL_PORT)
        service, _, db = parts.path.strip("/").partition("/")
        if not service or "/" in db:
            raise ValueError(
                "a Sentinel URL names the master after the hosts: "
                "redis+sentinel://host:port,host:port/mastername/0"
            )
        path = f"/{db or 0}"
        extra = {k: v for k, v in query if k in _SENTINEL_CREDENTIALS}  # already decoded
        query = [(k, v) for k, v in query if k not in _SENTINEL_CREDENTIALS]
    host, port = hosts[0]
    credentials = f"{userinfo}@" if userinfo else ""
    options = f"?{urlencode(query)}" if query else ""
    node_url = f"{parts.scheme}://{credentials}{_netloc(host, port)}{path}{options}"
    if scheme in _CLUSTER:
        return RedisTarget("cluster", node_url, hosts)
    return RedisTarget(
        "sentinel",
        node_url,
        hosts,
        service=unquote(service),
        sentinel_username=extra.get("sentinel_username"),
        sentinel_password=extra.get("sentinel_password"),
    )


def _hosts(hostlist: str, default_port: int) -> tuple[tuple[str, int], ...]:
    found = []
    for item in hostlist.split(","):
        host, port = item, str(default_port)
        if item.startswith("["):  # [::1]:7000
            host, _, after = item[1:].partition("]")
            port = after.removeprefix(":") or port
        elif item.count(":") == 1:
            host, port = item.split(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r} is not a host:port")
        found.append((host, int(port)))
    return tuple(found)


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
