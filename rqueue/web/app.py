"""``create_app``: the dashboard as an ASGI app, to serve alone or mount in another.

``rqueue dashboard`` serves it with uvicorn; a FastAPI or Starlette app mounts it
(``app.mount("/rqueue", create_app())``), and Django serves it beside its own ASGI
app (docs/dashboard.md). Every page is a route of a module in ``pages/``; the
session middleware (``auth``) lets a request in, and ``/metrics`` is
``prometheus_client``'s own app over :func:`rqueue.metrics.prometheus.registry_for`,
behind the same token.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from prometheus_client import make_asgi_app
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from rqueue.metrics.prometheus import registry_for
from rqueue.metrics.wait_limits import WaitLimits
from rqueue.store.default import default_queue
from rqueue.store.queue import RedisQueue
from rqueue.web.auth import Guard, SessionMiddleware
from rqueue.web.hosts import HostCheck, allowed_host
from rqueue.web.pages import (
    batches,
    failed,
    login,
    overview,
    queue_tasks,
    queues,
    schedules,
    task_names,
    tasks,
    workers,
)
from rqueue.web.render import Pages
from rqueue.web.state import Dashboard

STATIC = Path(__file__).parent / "static"


def create_app(
    queue: RedisQueue | None = None,
    *,
    token: str | None = None,
    read_only: bool = False,
    root_path: str = "",
    allowed_hosts: Iterable[str] = (),
    waits: WaitLimits | None = None,
) -> Starlette:
    """The dashboard of ``queue`` (default: the default connection, from ``REDIS_URL``).

    ``token``: required of every request, as ``Authorization: Bearer <token>`` or
    typed into the login form once (None: no login; serve it on loopback only).
    ``read_only``: show everything, change nothing (every action answers 403).
    ``root_path``: the path prefix a proxy in front strips before a request reaches
    the app, so its links point back through the proxy; a mount's own prefix
    (``app.mount("/rqueue", ...)``) needs nothing here.
    ``allowed_hosts``: without a token, the Host names answered besides loopback
    (127.0.0.0/8, ``::1``, ``localhost``), as Django's ``ALLOWED_HOSTS``; any other
    Host gets 400, which keeps DNS rebinding out (:mod:`rqueue.web.hosts`). With a
    token every Host is answered: each request logs in first.
    ``waits``: how long each queue's oldest ready task may wait before the queues page
    flags the queue (:class:`~rqueue.metrics.wait_limits.WaitLimits`; default none).
    """
    if isinstance(allowed_hosts, str):
        raise TypeError("allowed_hosts is a list of host names, not one string")
    try:
        hosts = tuple(allowed_host(name) for name in allowed_hosts)
    except ValueError as exc:
        raise ValueError(f"allowed_hosts: {exc}") from None
    root_path = root_path.rstrip("/")
    queue = queue or default_queue()
    guard = Guard(token or None, read_only, queue.config.secret)
    dashboard = Dashboard(
        queue=queue,
        pages=Pages(root_path, read_only, token_required=guard.token is not None),
        base=root_path,
        waits=waits or WaitLimits(),
    )
    routes: list[BaseRoute] = [
        *login.routes,
        *overview.routes,
        *queues.routes,
        *queue_tasks.routes,
        *workers.routes,
        *failed.routes,
        *schedules.routes,
        *batches.routes,
        *tasks.routes,
        *task_names.routes,
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/metrics", Exposition(make_asgi_app(registry=registry_for(dashboard.queue)))),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(HostCheck, allowed=hosts, open=guard.token is not None),
            Middleware(SessionMiddleware, guard=guard, base=root_path),
        ],
        exception_handlers={HTTPException: _error_page},
    )
    app.state.guard = guard
    app.state.dashboard = dashboard
    return app


class Exposition:
    """prometheus_client's ASGI app as the route ``/metrics`` itself: a ``Mount`` would
    answer ``/metrics`` with a redirect to ``/metrics/``, which scrapers do not follow
    with their bearer token. (Starlette takes a plain function for a request handler,
    hence a class.)"""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


async def _error_page(request: Request, exc: Exception) -> Response:
    """An error as a page in the dashboard's frame (a 404 of a task id, a 403 of an
    action); the detail is ours, never text from Redis."""
    assert isinstance(exc, HTTPException)
    if not hasattr(request.state, "session"):  # outside the middleware: plain text
        return PlainTextResponse(exc.detail, exc.status_code)
    pages: Pages = request.app.state.dashboard.pages
    return pages.render(request, "error.html", exc.status_code, detail=exc.detail)
