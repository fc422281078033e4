"""A queue's tasks: its ready, delayed, running, recently finished and failed lists.

One list a page, a window at a time (:mod:`rqueue.web.task_lists`), whatever the
list's length: ``/queue/<list>/<queue name>?offset=N``. The queue's name goes last in
the path since it may hold a ``/``.
"""

from __future__ import annotations

import time

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rqueue.errors import InvalidQueueName
from rqueue.failed import PAGE
from rqueue.metrics.read import queue_rows
from rqueue.store.keys import validate_queue_name
from rqueue.web.state import dashboard
from rqueue.web.task_lists import LISTS, listing


def offset_of(request: Request, name: str = "offset") -> int:
    """A position in a list from the query (``?offset=N``): 0 for anything but a whole
    number."""
    try:
        return max(0, int(request.query_params.get(name, 0)))
    except ValueError:
        return 0


def queue_tasks_page(request: Request) -> Response:
    found = dashboard(request)
    which = request.path_params["which"]
    if which not in LISTS:
        raise HTTPException(404, f"no such list: pick one of {', '.join(LISTS)}")
    try:
        name = validate_queue_name(request.path_params["name"])
    except InvalidQueueName as exc:
        raise HTTPException(404, str(exc)) from None
    [row] = queue_rows(found.queue, [name])
    return found.pages.render(
        request,
        "queue_tasks.html",
        row=row,
        lists=LISTS,
        listed=listing(found.queue, name, which, offset_of(request)),
        wait_limit=found.waits.limit(name),
        now=time.time(),
        page_size=PAGE,
    )


routes = [Route("/queue/{which}/{name:path}", queue_tasks_page, name="queue_tasks")]
