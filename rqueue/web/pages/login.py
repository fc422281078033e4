"""The login form: the token typed in once, then a signed session cookie (see auth)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rqueue.web.auth import Guard, checked_form, log_in, log_out
from rqueue.web.state import dashboard


def _next(value: object) -> str:
    """Where to go after logging in: a path of ours only, never another site
    (``//evil.example`` or ``https://...`` would be an open redirect)."""
    text = str(value or "/")
    if not text.startswith("/") or text.startswith("//") or "\\" in text:
        return "/"
    return text


def login_page(request: Request) -> Response:
    found = dashboard(request)
    guard: Guard = request.app.state.guard
    if guard.token is None:
        return RedirectResponse(found.url(request, "/"), 303)
    return found.pages.render(
        request, "login.html", next=_next(request.query_params.get("next")), failed=False
    )


async def login_action(request: Request) -> Response:
    found = dashboard(request)
    guard: Guard = request.app.state.guard
    form = await checked_form(request)
    target = _next(form.get("next"))
    given = form.get("token")
    if not isinstance(given, str) or not guard.token_matches(given):
        return found.pages.render(request, "login.html", 401, next=target, failed=True)
    log_in(request)
    return RedirectResponse(found.url(request, target), 303)


async def logout_action(request: Request) -> Response:
    await checked_form(request)
    log_out(request)
    return RedirectResponse(dashboard(request).url(request, "/login"), 303)


routes = [
    Route("/login", login_page, name="login"),
    Route("/login", login_action, methods=["POST"]),
    Route("/logout", logout_action, methods=["POST"]),
]
