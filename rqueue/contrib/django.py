"""Django: a worker with Django set up, dispatches after commit, the dashboard for staff.

**The worker.** ``DJANGO_SETTINGS_MODULE=mysite.settings rqueue work -A
rqueue.contrib.django`` preloads this module in the worker's parent, before it forks
its children. Imported while Django is not set up yet, it calls ``django.setup()``,
imports the ``tasks`` module of every installed app (as the admin finds ``admin.py``),
and closes the parent's database connections so that no child inherits a socket
another child also uses. A worker started with ``-A`` imports no other module by a
name read from Redis (rqueue/tasks/registry.py), so tasks live in an app's ``tasks.py`` or
in a module given with another ``-A``. Each child then closes stale connections before
and after every task, as Django does around every request (``CONN_MAX_AGE``).
Imported by a process where Django is set up or being set up (a web server,
``manage.py``), this module only defines what follows.

**After the commit.** A task dispatched inside ``transaction.atomic()`` can start
before the transaction commits, read the row before it exists, or act on a row that
is then rolled back. :func:`dispatch_on_commit` and :func:`after_commit` hand the
dispatch to ``transaction.on_commit``: it happens once the outermost transaction
commits (at once in autocommit), and never if it rolls back.

**The dashboard for staff only.** :func:`staff_only` wraps an ASGI app (the dashboard
of ``rqueue.web.create_app``) so that only an active staff user, read from Django's
session cookie exactly as Django reads it, reaches it; anyone else is redirected to
the admin's login page, which sends them back once they are logged in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from importlib import import_module
from typing import Any, ParamSpec, Protocol
from urllib.parse import urlencode

import django
from asgiref.sync import sync_to_async
from django.apps import apps
from django.conf import settings
from django.contrib.auth import REDIRECT_FIELD_NAME, get_user
from django.db import close_old_connections, connections, transaction
from django.http import HttpRequest
from django.http.cookie import parse_cookie
from django.shortcuts import resolve_url
from django.utils.encoding import iri_to_uri
from django.utils.module_loading import autodiscover_modules

from rqueue import Task, TaskEvent, on_exception, on_processed, on_processing

P = ParamSpec("P")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["after_commit", "dispatch_on_commit", "staff_only"]


class Dispatchable(Protocol):
    """Anything with a ``dispatch()``: ``task.pending(...)``, a chain, a batch."""

    def dispatch(self) -> object: ...


def dispatch_on_commit(task: Task[P, Any], /, *args: P.args, **kwargs: P.kwargs) -> None:
    """``task.dispatch(*args, **kwargs)`` once the current transaction of the default
    database commits; nothing if it rolls back. Arguments are encoded then, so pass ids."""
    after_commit(task.pending(*args, **kwargs))


def after_commit(call: Dispatchable, *, using: str | None = None) -> None:
    """Dispatch ``call`` (``task.pending(...)``, ``chain(...)``, ``batch(...)``) once
    the transaction of database ``using`` (the default one if None) commits."""
    transaction.on_commit(call.dispatch, using=using)


def staff_only(app: ASGIApp, *, login_url: str = "admin:login") -> ASGIApp:
    """``app`` for active staff users; others go to ``login_url`` (a URL or a URL name).

    The user comes from Django's session cookie, through the session engine and the
    authentication backends of the settings, with Django's own checks (a session
    whose password hash is stale logs out). A WebSocket from anyone else is closed
    (1008: policy violation); the lifespan messages go through untouched.
    """

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or await _is_staff(scope):
            await app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await _redirect(send, _login_location(login_url, scope))

    return guarded


async def _is_staff(scope: Scope) -> bool:
    cookies = "; ".join(
        value.decode("latin-1") for name, value in scope.get("headers", []) if name == b"cookie"
    )
    return bool(await sync_to_async(_staff_session)(cookies))


def _staff_session(cookies: str) -> bool:
    """Whether the session named by the cookie is an active staff user's. Runs in
    Django's sync thread: the session store and the user are read from the database."""
    key = parse_cookie(cookies).get(settings.SESSION_COOKIE_NAME)
    if not key:
        return False
    close_old_connections()  # as Django does when a request starts and ends
    try:
        request = HttpRequest()
        request.session = import_module(settings.SESSION_ENGINE).SessionStore(key)
        user = get_user(request)
        return bool(user.is_active and user.is_staff)
    finally:
        close_old_connections()


def _login_location(login_url: str, scope: Scope) -> str:
    """The login page, with ``next`` the page asked for (Django's login view checks it
    is on this site before it redirects there)."""
    query = scope.get("query_string", b"").decode("latin-1")
    asked = scope["path"] + (f"?{query}" if query else "")
    login = iri_to_uri(resolve_url(login_url))
    return f"{login}?{urlencode({REDIRECT_FIELD_NAME: asked})}"


async def _redirect(send: Send, location: str) -> None:
    headers = [(b"location", location.encode("latin-1")), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 302, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _close_connections(event: TaskEvent) -> None:
    close_old_connections()


def _prepare_worker() -> None:
    """Set Django up in a worker's parent that preloads this module (see above)."""
    django.setup()
    autodiscover_modules("tasks")
    connections.close_all()
    on_processing(_close_connections)
    on_processed(_close_connections)
    on_exception(_close_connections)


if not (apps.ready or apps.loading):
    _prepare_worker()
