"""What every page handler needs from the app: the queue connection, the renderer and
the wait limits.

Kept on ``app.state`` by :func:`rqueue.web.app.create_app` and read back here, so
that the page modules need not import the app module that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request

from rqueue.metrics.wait_limits import WaitLimits
from rqueue.store.queue import RedisQueue
from rqueue.web.auth import base_of
from rqueue.web.render import Pages


@dataclass(frozen=True)
class Dashboard:
    queue: RedisQueue
    pages: Pages
    base: str
    """The prefix a proxy strips before a request reaches us (``root_path``)."""
    waits: WaitLimits = field(default_factory=WaitLimits)
    """How long each queue's oldest ready task may wait before the queue is flagged."""

    def url(self, request: Request, path: str) -> str:
        """``path`` inside the dashboard as a link, wherever it is mounted."""
        return base_of(request, self.base) + path


def dashboard(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found
