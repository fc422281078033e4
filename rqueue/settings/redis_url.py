"""Where Redis is: the three forms of ``REDIS_URL``, read into one :class:`RedisTarget`.

- ``redis://host:6379/0`` (or ``rediss://``, ``unix://``): one server; with
  ``RQUEUE_CLUSTER=1`` any node of a Redis Cluster, the others found from it.
- ``redis+cluster://h1:7000,h2:7001/0``: a Redis Cluster, named by seed nodes, so that
  a client starting while one of them is down still finds the cluster.
- ``redis+sentinel://h1:26379,h2:26379/mymaster/0``: the master Sentinel names
  ``mymaster``. The URL's user and password are the data nodes'; the sentinels' own go
  in ``?sentinel_username=`` and ``?sentinel_password=``, since they are often different;
  ``?sentinel_check_interval=`` is how often the sentinels are asked again for the
  master (seconds; their announcements move a client at once, this is the fallback).

``rediss+cluster://`` and ``rediss+sentinel://`` use TLS for every connection. Read
here, at layer 0, so a malformed URL is a usage error where it was given (the option or
variable), not a connection error later; the store opens connections from the result.

A URL holds a password, and a malformed one holds it where no parser expects it
(``redis://app:Q1w2/E3r4@host/0`` puts ``Q1w2`` where the port goes). So no error here
quotes any part of the URL but the names of the options it knows, everything redis-py
would read differently from rqueue (an unknown option, an unencoded ``/`` in a
password) is refused here, before redis-py can quote it, and :func:`redact_url` masks
without parsing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from rqueue.text import mask_credentials

_SINGLE = ("redis", "rediss", "unix")
_CLUSTER = ("redis+cluster", "rediss+cluster")
_SENTINEL = ("redis+sentinel", "rediss+sentinel")
_SENTINEL_OWN = ("sentinel_username", "sentinel_password", "sentinel_check_interval")
"""A Sentinel URL's options that are about the sentinels, not passed to redis-py."""
_SCHEME = re.compile(r"[a-z][a-z0-9+.\-]*")
DEFAULT_SENTINEL_PORT = 26379
DEFAULT_PORT = 6379
_ENCODE = (
    "percent-encode / ? # @ & and % in a user name or password "
    "(/ is %2F, ? is %3F, # is %23, @ is %40, & is %26, % is %25)"
)


@dataclass(frozen=True)
class RedisTarget:
    """What a Redis URL names: one server, a cluster's seeds, or a Sentinel service."""

    kind: str
    """``single``, ``cluster`` or ``sentinel``."""
    node_url: str = field(repr=False)
    """A plain ``redis://``/``rediss://`` URL for redis-py: credentials, database, TLS
    and query options of every data connection. Its host is the first node's; on
    Cluster and Sentinel each connection replaces it with the node it needs. Not in
    ``repr``: it holds the password."""
    hosts: tuple[tuple[str, int], ...] = ()
    """The seed nodes (Cluster) or the sentinels (Sentinel)."""
    service: str = ""
    """The name Sentinel monitors the master under."""
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)
    sentinel_check_interval: float = 1.0
    """Seconds a master's address is trusted before the sentinels are asked again."""

    @property
    def tls(self) -> bool:
        return self.node_url.startswith("rediss://")


@dataclass(frozen=True)
class _Option:
    """A query option rqueue passes to redis-py: what its value must be, and where."""

    expects: str
    """Said in the error when the value is not that."""
    valid: Callable[[str], bool]
    tls_only: bool = False
    sentinel_only: bool = False


def _digits(text: str) -> bool:
    """Only 0-9 (``str.isdigit`` takes ``²`` too, which ``int`` refuses)."""
    return text.isascii() and text.isdigit()


def _number(low: float, high: float, whole: bool = False) -> Callable[[str], bool]:
    def valid(text: str) -> bool:
        if whole:
            return _digits(text) and low <= int(text) <= high
        try:
            value = float(text)
        except ValueError:
            return False
        return math.isfinite(value) and low <= value <= high  # nan fails the comparison too

    return valid


def _anything(text: str) -> bool:
    return True


_BOOLEAN = ("1", "0", "true", "false", "yes", "no")
"""The spellings redis-py reads as the same truth rqueue does (it reads ``off`` as on)."""

OPTIONS: Mapping[str, _Option] = {
    "db": _Option("a whole number from 0", _number(0, 2**31 - 1, whole=True)),
    "socket_timeout": _Option("a number from 0.1 to 3600 (seconds)", _number(0.1, 3600)),
    "socket_connect_timeout": _Option("a number from 0.1 to 3600 (seconds)", _number(0.1, 3600)),
    "socket_keepalive": _Option(" or ".join(_BOOLEAN), lambda t: t.lower() in _BOOLEAN),
    "health_check_interval": _Option(
        "a whole number from 0 to 3600 (seconds)", _number(0, 3600, whole=True)
    ),
    "client_name": _Option(
        "a name without spaces", lambda t: t.isprintable() and not any(c.isspace() for c in t)
    ),
    "username": _Option("a user name", _anything),
    "password": _Option("a password", _anything),
    "ssl_cert_reqs": _Option(
        "none, optional or required",
        lambda t: t in ("none", "optional", "required"),
        tls_only=True,
    ),
    "ssl_check_hostname": _Option(
        " or ".join(_BOOLEAN), lambda t: t.lower() in _BOOLEAN, tls_only=True
    ),
    "ssl_ca_certs": _Option("a file", _anything, tls_only=True),
    "ssl_ca_path": _Option("a directory", _anything, tls_only=True),
    "ssl_certfile": _Option("a file", _anything, tls_only=True),
    "ssl_keyfile": _Option("a file", _anything, tls_only=True),
    "ssl_password": _Option("a password", _anything, tls_only=True),
    "sentinel_username": _Option("a user name", _anything, sentinel_only=True),
    "sentinel_password": _Option("a password", _anything, sentinel_only=True),
    "sentinel_check_interval": _Option(
        "a number from 0.1 to 86400 (seconds)", _number(0.1, 86400), sentinel_only=True
    ),
}
"""Every query option a Redis URL may carry. Any other is refused by name: redis-py
would pass it on to its connection class, which fails at the first connect."""


def parse_redis_url(url: str) -> RedisTarget:
    """Read ``url``; ValueError saying what was expected if it is none of the forms.

    The message never quotes the URL (see the module's docstring).
    """
    if not url.isprintable() or any(c.isspace() for c in url):
        raise ValueError(
            "a Redis URL holds no spaces or control characters: percent-encode them "
            "in a password (a space is %20)"
        )
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in (*_SINGLE, *_CLUSTER, *_SENTINEL):
        named = f"scheme {scheme + sep!r}" if sep and _SCHEME.fullmatch(scheme) else "scheme"
        raise ValueError(
            f"unknown Redis URL {named}; use redis://, rediss://, "
            "unix://, redis+cluster://host:port,host:port/0 or "
            "redis+sentinel://host:port,host:port/mastername/0"
        )
    authority_end = _authority_end(rest)
    after_authority = rest[authority_end:]
    if "@" in after_authority:
        raise ValueError(f"the Redis URL has an @ after a /, ? or #: {_ENCODE}")
    if "#" in after_authority:
        raise ValueError(f"a Redis URL has no #fragment: {_ENCODE}")
    tls = scheme.startswith("rediss")
    parts = urlsplit(f"{'rediss' if tls else 'redis'}://{rest}")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    query = _query(parts.query, tls=tls, sentinel=scheme in _SENTINEL)
    if scheme in _SINGLE:
        if scheme != "unix":
            _one_server(hostlist, parts.path)
        return RedisTarget("single", url)
    if scheme in _CLUSTER:
        hosts = _hosts(hostlist, DEFAULT_PORT)
        path = parts.path
        if path.strip("/") not in ("", "0") or dict(query).get("db", "0") != "0":
            raise ValueError("a Redis Cluster has only database 0: end the URL with /0 or /")
        extra: dict[str, str] = {}
    else:
        hosts = _hosts(hostlist, DEFAULT_SENTINEL_PORT)
        service, _, db = parts.path.strip("/").partition("/")
        if not service or "/" in db or not _digits(db or "0"):
            raise ValueError(
                "a Sentinel URL names the master after the hosts, then the database: "
                "redis+sentinel://host:port,host:port/mastername/0"
            )
        path = f"/{db or 0}"
        extra = {k: v for k, v in query if k in _SENTINEL_OWN}  # already decoded
        query = [(k, v) for k, v in query if k not in _SENTINEL_OWN]
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
        sentinel_check_interval=float(extra.get("sentinel_check_interval") or 1.0),
    )


def _query(text: str, tls: bool, sentinel: bool) -> list[tuple[str, str]]:
    """The URL's options, each known and valid for this form of URL, else ValueError.

    An option that follows a password is not named: it is most likely the rest of that
    password, cut at an unencoded ``&``.
    """
    allowed = [
        name
        for name, option in OPTIONS.items()
        if (tls or not option.tls_only) and (sentinel or not option.sentinel_only)
    ]
    pairs = parse_qsl(text, keep_blank_values=True)
    after_password = False
    for index, (name, value) in enumerate(pairs):
        if name not in allowed:
            if after_password:
                raise ValueError(f"the Redis URL has an unknown option after a password: {_ENCODE}")
            why = " (it needs rediss://)" if name in OPTIONS and OPTIONS[name].tls_only else ""
            raise ValueError(
                f"unknown option {name!r} in the Redis URL{why}; allowed: {', '.join(allowed)}"
            )
        if any(seen == name for seen, _ in pairs[:index]):
            raise ValueError(f"option {name} is given twice in the Redis URL")
        if value and not OPTIONS[name].valid(value):
            raise ValueError(f"option {name} of the Redis URL must be {OPTIONS[name].expects}")
        after_password = after_password or "pass" in name
    return pairs


def _one_server(hostlist: str, path: str) -> None:
    """Check what redis-py would read differently: a port that is not one (it would quote
    it: a password, in ``redis://:Q1w2:x/0``), a database that is not a number (it would
    use 0 without a word)."""
    if hostlist and len(_hosts(hostlist, DEFAULT_PORT)) > 1:
        raise ValueError(
            "a redis:// URL names one server: name a cluster's nodes with "
            "redis+cluster://host:port,host:port/0"
        )
    if not _digits(path.strip("/") or "0"):
        raise ValueError("the database after the host must be a whole number: redis://host:6379/0")


def _hosts(hostlist: str, default_port: int) -> tuple[tuple[str, int], ...]:
    found = []
    items = hostlist.split(",")
    for number, item in enumerate(items, 1):
        host, port = item, str(default_port)
        if item.startswith("["):  # [::1]:7000
            host, _, after = item[1:].partition("]")
            port = after.removeprefix(":") or port
        elif item.count(":") == 1:
            host, port = item.split(":")
        if not host or not _digits(port) or not 0 < int(port) < 65536:
            which = f"host {number} of {len(items)}" if len(items) > 1 else "the host"
            raise ValueError(f"{which} in the Redis URL is not host:port (a port from 1 to 65535)")
        found.append((host, int(port)))
    return tuple(found)


def _authority_end(rest: str) -> int:
    """Where the user, password and hosts after ``://`` end, as a URL parser reads it:
    at the first ``/``, ``?`` or ``#`` (a password holding one is cut there)."""
    return min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _redact_port(item: str) -> str:
    """One ``host:port`` of a URL, masked whole if its port is no number."""
    if item.startswith("["):  # [::1]:7000
        _, bracket, after = item.partition("]")
        fine = bracket and (not after or (after[0] == ":" and _digits(after[1:])))
    else:
        _, colon, port = item.partition(":")
        fine = not colon or _digits(port)
    return item if fine else "***"


def redact_url(url: str) -> str:
    """``url`` with anything that could be a password masked as ``***``, parsed or not.

    The whole string is one URL, spaces and all (:func:`~rqueue.text.mask_credentials`
    says what is masked); a ``...password=`` option's value runs to the next option
    rqueue knows. A "port" that is no number may be a password too
    (``redis://app:Q1w2/0``, the host forgotten). Without ``://`` nothing can be told
    apart: nothing is shown.
    """
    scheme, sep, rest = mask_credentials(url, OPTIONS).partition("://")
    if not sep:
        return "***"
    authority_end = _authority_end(rest)
    credentials, at, hosts = rest[:authority_end].rpartition("@")
    hosts = ",".join(map(_redact_port, hosts.split(",")))
    return f"{scheme}{sep}{credentials}{at}{hosts}{rest[authority_end:]}"
