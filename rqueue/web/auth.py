"""Who may see the dashboard and change anything through it.

Without a token the dashboard is open to whoever can reach it (``rqueue dashboard``
then binds to loopback only). With a token (``RQUEUE_DASHBOARD_TOKEN``) a request must
carry it as ``Authorization: Bearer <token>`` (a scraper, a script) or come with the
session cookie the login form sets once the token was typed in.

The session is a small signed cookie (HMAC-SHA256, compared with
:func:`hmac.compare_digest`), so several dashboard processes sharing the token share
sessions and nothing is stored server-side. Its key is derived from the token:
changing the token logs everyone out. Every visitor gets one, logged in or not,
because it also carries the CSRF token: a browser sends cookies along with a form
another site posts to us, so every state-changing POST must echo the session's
CSRF token in a form field (:func:`action_form`). A request authenticated by the
bearer header needs none: no browser adds that header on its own.

``read_only`` refuses every action (403) here, in the one function all actions call,
besides hiding their buttons.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

COOKIE = "rqueue_dashboard"
SESSION_SECONDS = 12 * 3600
"""How long a login lasts: a working day, then the token is asked for again."""
LONGEST_NOTICE = 500
"""Characters of a notice kept: a cookie holds 4 KB at most."""
SECURITY_HEADERS = {
    # Scripts only from our own static files: should any text from Redis ever slip
    # through unescaped, a browser still would not run it.
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def same(given: str, expected: str) -> bool:
    """Constant-time equality of a secret and what a request offered for it, as bytes:
    :func:`hmac.compare_digest` raises on a str that is not ASCII, which anyone can send."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


@dataclass(frozen=True)
class Session:
    csrf: str
    authenticated: bool = False
    issued: float = 0.0
    flash: str = ""
    """A one-line notice shown on the next page (what an action did), then dropped."""


class Guard:
    """Checks the token, and signs and reads session cookies."""

    def __init__(self, token: str | None, read_only: bool, secret: str | None = None) -> None:
        self.token = token
        self.read_only = read_only
        # Derived from the token (or, without one, from RQUEUE_SECRET), so processes
        # sharing it accept each other's cookies and CSRF tokens; with neither, a key of
        # this process: serve from one process, or a form may go to another that
        # refuses it.
        shared = token or secret
        seed = shared.encode() if shared else secrets.token_bytes(32)
        self._key = hashlib.sha256(b"rqueue dashboard session\0" + seed).digest()

    def token_matches(self, given: str) -> bool:
        return self.token is not None and same(given, self.token)

    def bearer(self, header: str | None) -> bool:
        scheme, _, given = (header or "").partition(" ")
        return scheme.lower() == "bearer" and self.token_matches(given.strip())

    def new_session(self) -> Session:
        return Session(csrf=secrets.token_urlsafe(24), issued=time.time())

    def read(self, cookie: str | None) -> Session | None:
        """The session in ``cookie`` if we signed it and it has not expired."""
        body, _, signature = (cookie or "").rpartition(".")
        if not body or not same(signature, self._sign(body)):
            return None
        try:
            fields = json.loads(base64.urlsafe_b64decode(body))
            session = Session(
                csrf=str(fields["csrf"]),
                authenticated=fields["auth"] is True,
                issued=float(fields["issued"]),
                flash=str(fields.get("flash", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None
        return session if time.time() - session.issued < SESSION_SECONDS else None

    def write(self, session: Session) -> str:
        fields = {
            "csrf": session.csrf,
            "auth": session.authenticated,
            "issued": session.issued,
            "flash": session.flash,
        }
        body = base64.urlsafe_b64encode(json.dumps(fields).encode()).decode()
        return f"{body}.{self._sign(body)}"

    def _sign(self, body: str) -> str:
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()


def route_path(request: Request) -> str:
    """The path inside the dashboard, whatever it is mounted under."""
    path: str = request.scope["path"]
    root: str = request.scope.get("root_path", "")
    return path[len(root) :] or "/" if root and path.startswith(root) else path


class SessionMiddleware(BaseHTTPMiddleware):
    """Reads the session, lets in only authenticated requests, writes the cookie back."""

    def __init__(self, app: object, guard: Guard, base: str) -> None:
        super().__init__(app)  # type: ignore[arg-type]
        self.guard = guard
        self.base = base

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        guard = self.guard
        cookie = request.cookies.get(COOKIE)
        session = guard.read(cookie) or guard.new_session()
        request.state.session = session
        request.state.bearer = guard.bearer(request.headers.get("authorization"))
        path = route_path(request)
        let_in = guard.token is None or request.state.bearer or session.authenticated
        # Open to anyone: the login form, and the stylesheet and script it loads.
        if not let_in and not (path == "/login" or path.startswith("/static/")):
            response = self._refused(request, path)
            self._keep(request, response, cookie)
            return response
        response = await call_next(request)
        self._keep(request, response, cookie)
        return response

    def _refused(self, request: Request, path: str) -> Response:
        """A browser asking for a page goes to the login form; anything else gets 401."""
        if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
            query = urlencode(
                {"next": path + (f"?{request.url.query}" if request.url.query else "")}
            )
            return RedirectResponse(f"{base_of(request, self.base)}/login?{query}", 303)
        return PlainTextResponse(
            "authentication required", 401, headers={"WWW-Authenticate": "Bearer"}
        )

    def _keep(self, request: Request, response: Response, cookie: str | None) -> None:
        """Set the security headers, and the cookie if the session changed."""
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        written = self.guard.write(request.state.session)
        if written != cookie:
            response.set_cookie(
                COOKIE,
                written,
                max_age=SESSION_SECONDS,
                path=base_of(request, self.base) or "/",
                httponly=True,
                samesite="lax",
                secure=request.url.scheme == "https",
            )


def base_of(request: Request, base: str) -> str:
    """The prefix of every link: a proxy's (``root_path``) and where we are mounted."""
    mounted: str = request.scope.get("root_path", "")
    return base + mounted


async def action_form(request: Request) -> FormData:
    """The form of a state-changing POST, once it passed the checks every action needs:
    not in read-only mode (403), and the session's CSRF token echoed (403 if not),
    unless the request carried the bearer token."""
    guard: Guard = request.app.state.guard
    if guard.read_only:
        raise HTTPException(403, "the dashboard is read-only")
    return await checked_form(request)


async def checked_form(request: Request) -> FormData:
    """A POST's form, if it echoes the session's CSRF token (or came with the bearer
    token); 403 if not. Logging in and out need this too, even when read-only."""
    form = await request.form()
    if not request.state.bearer:
        given = form.get("csrf")
        session: Session = request.state.session
        if not isinstance(given, str) or not same(given, session.csrf):
            raise HTTPException(403, "missing or wrong CSRF token: reload the page")
    return form


def notify(request: Request, message: str) -> None:
    """Show ``message`` on the next page this visitor sees (its first
    :data:`LONGEST_NOTICE` characters: it travels in the cookie)."""
    if len(message) > LONGEST_NOTICE:
        message = message[: LONGEST_NOTICE - 1] + "…"
    request.state.session = replace(request.state.session, flash=message)


def take_notice(request: Request) -> str:
    """The notice left for this page, dropped from the session now that it shows."""
    session: Session = request.state.session
    if session.flash:
        request.state.session = replace(session, flash="")
    return session.flash


def log_in(request: Request) -> None:
    """Mark the session logged in, with a fresh CSRF token (the old one was seen before)."""
    guard: Guard = request.app.state.guard
    request.state.session = replace(guard.new_session(), authenticated=True)


def log_out(request: Request) -> None:
    guard: Guard = request.app.state.guard
    request.state.session = guard.new_session()
