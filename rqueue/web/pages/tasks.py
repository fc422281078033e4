"""A task by id: its kept status and result or error, and its failed record if any.

The status is read as ``rqueue status`` reads it (:mod:`rqueue.store.results`):
``result_of(id).status()`` gives the state alone, and the page shows the record too.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rqueue.errors import InvalidPayload
from rqueue.failed import FailedTasks
from rqueue.store.results import TaskStatus, find_queue, read_status
from rqueue.web.state import dashboard


def lookup(request: Request) -> Response:
    """The header's search box: a task id goes to its page."""
    task_id = request.query_params.get("id", "").strip()
    where = f"/tasks/{quote(task_id, safe='')}" if task_id else "/"
    return RedirectResponse(dashboard(request).url(request, where), 303)


def task_page(request: Request) -> Response:
    found = dashboard(request)
    task_id = request.path_params["task_id"]
    status: TaskStatus | None = None
    problem = ""
    queue_name = find_queue(found.queue, task_id)
    if queue_name is not None:
        try:
            status = read_status(found.queue, queue_name, task_id)
        except InvalidPayload as exc:  # a record altered in Redis
            problem = str(exc)
    if status is not None and status.status == "unknown":  # expired since found
        status = None
    # Its failed record, if any: in its own queue's list when its queue is known.
    where = [queue_name] if queue_name is not None else None
    failed = FailedTasks(found.queue).find_all([task_id], where).get(task_id)
    return found.pages.render(
        request,
        "task.html",
        task_id=task_id,
        status=status,
        problem=problem,
        failed=failed,
        status_code=404 if status is None and failed is None and not problem else 200,
    )


routes = [
    Route("/tasks", lookup, name="lookup"),
    Route("/tasks/{task_id}", task_page, name="task"),
]
