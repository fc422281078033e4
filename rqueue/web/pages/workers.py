"""The workers page: every running worker, and what each child runs now, for how long.

From the worker registry (:func:`rqueue.metrics.list_workers`): entries expire
a few seconds after a worker dies, so the page never shows one for long. Above them,
the pools ``rqueue supervise`` runs (:func:`rqueue.worker.pools.status.list_pools`): each
one's targets and the inputs of its last scaling decision.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rqueue.metrics import list_workers
from rqueue.web.state import dashboard
from rqueue.worker.pools.status import list_pools


def workers_page(request: Request) -> Response:
    found = dashboard(request)
    workers, pools = list_workers(found.queue), list_pools(found.queue)
    return found.pages.render(
        request, "workers.html", workers=workers, pools=pools, now=time.time()
    )


def workers_table(request: Request) -> Response:
    """The list alone, which the page's script fetches to keep it current."""
    found = dashboard(request)
    workers, pools = list_workers(found.queue), list_pools(found.queue)
    return found.pages.fragment(
        request, "workers_table.html", workers=workers, pools=pools, now=time.time()
    )


routes = [
    Route("/workers", workers_page, name="workers"),
    Route("/workers/table", workers_table),
]
