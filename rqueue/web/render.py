"""Pages as HTML: the Jinja2 templates, autoescaped, and the filters that show Redis's text.

Task names, arguments, messages, tracebacks, queue and host names come from Redis,
where anyone who can write to it puts what they like, and from task code. Jinja2's
autoescape (on for every template, whatever its name) turns ``<script>`` into text;
the ``shown`` filter first passes it through :func:`rqueue.text.shown`, as the CLI
does, so control characters (a terminal escape, a bidi override) show as ``\\x1b``
instead of vanishing or reordering the line, and a credential in a message is masked.
A template never marks anything read from Redis ``|safe``: only the SVG that
:mod:`rqueue.web.charts` drew (numbers and escaped labels) is markup.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from rqueue.text import shown
from rqueue.timing import moment
from rqueue.web.auth import Session, base_of, take_notice

TEMPLATES = Path(__file__).parent / "templates"


def duration(seconds: object) -> str:
    """``0.042 s``, ``12.5 s``, ``3 min 20 s``, ``2 h 05 min``; ``-`` for no number."""
    try:
        value = float(seconds)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "-"
    if not math.isfinite(value) or value < 0:
        return "-"
    if value < 10:
        return f"{value:.3f} s"
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{int(value // 60)} min {int(value % 60):02d} s"
    return f"{int(value // 3600)} h {int(value % 3600 // 60):02d} min"


def shown_repr(value: object) -> str:
    """``repr(value)`` fit to show (arguments, results); one nested too deep for ``repr``
    (msgpack nests up to 1023 levels) says so."""
    try:
        return shown(repr(value))
    except RecursionError:
        return f"(a {type(value).__name__} nested too deeply to show)"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every template, whatever its file name
        undefined=jinja2.StrictUndefined,
    )
    env.filters["shown"] = shown
    env.filters["traceback"] = lambda text: shown(str(text).rstrip(), multiline=True)
    env.filters["repr"] = shown_repr
    env.filters["moment"] = moment  # the one rule for times shown (timing.moment)
    env.filters["duration"] = duration
    return env


class Pages:
    """Renders a page with what every page shows: links, the CSRF token, the mode."""

    def __init__(self, base: str, read_only: bool, token_required: bool) -> None:
        self.base = base
        self.read_only = read_only
        self.token_required = token_required
        self.templates = Jinja2Templates(env=_environment())

    def render(
        self, request: Request, name: str, status_code: int = 200, **context: Any
    ) -> Response:
        """A whole page; it shows the notice an action left, and drops it."""
        return self._render(request, name, status_code, notice=take_notice(request), **context)

    def fragment(self, request: Request, name: str, **context: Any) -> Response:
        """A part of a page that its script fetches again to keep it current."""
        return self._render(request, name, 200, notice="", **context)

    def _render(self, request: Request, name: str, status_code: int, **context: Any) -> Response:
        session: Session = request.state.session
        context.update(
            base=base_of(request, self.base),
            csrf=session.csrf,
            read_only=self.read_only,
            logged_in=self.token_required and session.authenticated,
            # Before login (the login form, an error) no links nor task search: they
            # lead only back to the login form, and tell a stranger what is inside.
            let_in=not self.token_required or session.authenticated or request.state.bearer,
        )
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)
