"""Which ``Host`` a dashboard without a token answers: loopback, and the names it was given.

Without a token the dashboard trusts whoever reaches it, which on loopback means this
machine's users. DNS rebinding breaks that: a page on ``evil.example`` whose name is
then made to resolve to 127.0.0.1 is, to the browser, the same origin as the
dashboard, so its script reads the pages (task arguments, tracebacks), takes a CSRF
token from a form and posts actions. Its requests still carry ``Host: evil.example``
though, so a dashboard that answers only loopback Hosts (127.0.0.0/8, ``::1``,
``localhost``, any port) and the names it was told (``--allowed-host``,
``create_app(allowed_hosts=...)``), as Django's ``ALLOWED_HOSTS`` does, is out of its
reach. With a token every request logs in first, so any Host is answered as before.

:class:`HostCheck` wraps the whole app, so every route and method is covered (pages,
actions, ``/metrics``, the static files), before the session is even read.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from rqueue.text import shown

ANY_HOST = "*"
"""An allowed host that lets every Host in (as Django's ``"*"``)."""


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ``::1``, bracketed or not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def allowed_host(value: str) -> str:
    """``value`` as an allowed host: a name (``dash.example``), ``.example.com`` for it
    and every subdomain, an address (``192.0.2.7``, ``[2001:db8::1]``), or ``*``;
    lower-cased, no port. ValueError, saying why, for anything else."""
    name = value.strip().lower().rstrip(".")
    if name == ANY_HOST:
        return name
    bare = name[1:] if name.startswith(".") else name
    if bare.startswith("[") and bare.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(bare[1:-1]))
        except ValueError:
            raise ValueError(f"{value!r} is not an IPv6 address in brackets") from None
    if not bare or not all(part and _label(part) for part in bare.split(".")):
        raise ValueError(
            f"{value!r} is not a host name (give a name like dash.example, without "
            "scheme, port or path; .example.com for a domain and its subdomains)"
        )
    return name


def _label(part: str) -> bool:
    return len(part) <= 63 and all(c.isalnum() or c in "-_" for c in part) and part.isascii()


def host_of(header: str) -> str | None:
    """The host of a ``Host`` header without its port, lower-cased (IPv6 without its
    brackets); None when it is not one."""
    value = header.strip().lower()
    if value.startswith("["):
        address, bracket, _port = value[1:].partition("]")
        if not bracket:
            return None
        try:
            return str(ipaddress.IPv6Address(address))
        except ValueError:
            return None
    name = value.rpartition(":")[0] if ":" in value else value
    name = name.rstrip(".")
    return name or None


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Whether a request to ``host`` (from :func:`host_of`) is answered."""
    if is_loopback(host):
        return True
    for name in allowed:
        if name == ANY_HOST or host == name:
            return True
        if name.startswith(".") and (host == name[1:] or host.endswith(name)):
            return True
    return False


class HostCheck:
    """Answers 400 to a request whose Host is not loopback nor allowed (unless ``open``:
    a token is set, so every request logs in first)."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...], open: bool) -> None:
        self.app = app
        self.allowed = allowed
        self.open = open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.open or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = _header(scope)
        host = host_of(header) if header is not None else _server_host(scope)
        if host is not None and host_allowed(host, self.allowed):
            await self.app(scope, receive, send)
            return
        refused = PlainTextResponse(
            f"Host {shown(header or '')!r} is not served: this dashboard has no token, so it "
            "answers loopback hosts only (127.0.0.1, ::1, localhost) and the names given "
            "with --allowed-host (create_app(allowed_hosts=...)); or set "
            "RQUEUE_DASHBOARD_TOKEN to require a login\n",
            400,
            headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"},
        )
        await refused(scope, receive, send)


def _header(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"host":
            return bytes(value).decode("latin-1")
    return None


def _server_host(scope: Scope) -> str | None:
    """Without a Host header (HTTP/1.0; no browser sends one), the address the request
    came in on: what Starlette's ``request.url`` uses too."""
    server = scope.get("server")
    return str(server[0]) if server else None
