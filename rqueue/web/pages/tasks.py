"""A task by id: where it is now, its arguments, attempts, tags, trace id, progress and
events, its kept status and result or error, its failed record; cancel, retry or
forget it.

Where it is, is read as ``rqueue status`` reads it (:func:`rqueue.tasks.whereabouts.locate`):
its payload near where a list page showed it (``?queue=NAME&at=N``: the lists are
windows, never scanned whole), its kept status, its failed record.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rqueue.errors import InvalidQueueName
from rqueue.failed import FailedTasks
from rqueue.store.cancel import cancel, cancel_anywhere
from rqueue.store.keys import validate_queue_name
from rqueue.store.live_events import recent_events
from rqueue.tasks.whereabouts import locate
from rqueue.web.auth import action_form, notify
from rqueue.web.pages.failed import PAST, act_on_ids
from rqueue.web.pages.queue_tasks import offset_of
from rqueue.web.state import dashboard
from rqueue.web.task_lists import trace_id


def lookup(request: Request) -> Response:
    """The header's search box: a task id goes to its page."""
    task_id = request.query_params.get("id", "").strip()
    where = f"/tasks/{quote(task_id, safe='')}" if task_id else "/"
    return RedirectResponse(dashboard(request).url(request, where), 303)


def _queue_hint(value: str | None) -> str | None:
    try:
        return validate_queue_name(value) if value else None
    except InvalidQueueName:
        return None


def task_page(request: Request) -> Response:
    found = dashboard(request)
    queue = found.queue
    task_id = request.path_params["task_id"]
    given = _queue_hint(request.query_params.get("queue"))
    where = locate(queue, task_id, given, offset_of(request, "at"))
    queue_name, state = where.queue, where.state
    return found.pages.render(
        request,
        "task.html",
        task_id=task_id,
        queue_name=queue_name,
        state=state,
        held=where.held,
        job=where.job,
        payload_problem=where.payload_problem,
        trace=trace_id(where.job),
        progress=where.progress,
        events=recent_events(queue, queue_name, task_id) if queue_name else [],
        # A running one too: its worker stops it (cancel.lua's request, worker/cancels.py).
        cancellable=(where.pending and state in ("ready", "delayed", "queued", "waiting"))
        or state == "running",
        status=where.status,
        problem=where.status_problem,
        failed=where.failed,
        status_code=404 if state == "" and not where.status_problem else 200,
    )


async def cancel_action(request: Request) -> Response:
    form = await action_form(request)
    queue = dashboard(request).queue
    task_id = request.path_params["task_id"]
    name = _queue_hint(str(form.get("queue", "")))
    if name is not None:
        outcome = await run_in_threadpool(cancel, queue, task_id, name)
    else:
        outcome = (await run_in_threadpool(cancel_anywhere, queue, task_id)).outcome
    notify(request, f"Task {task_id} {outcome.message}.")
    return _back(request, task_id, name)


async def retry_action(request: Request) -> Response:
    return await _on_failed(request, "retry")


async def forget_action(request: Request) -> Response:
    return await _on_failed(request, "forget")


async def _on_failed(request: Request, verb: str) -> Response:
    form = await action_form(request)
    queue = dashboard(request).queue
    task_id = request.path_params["task_id"]
    done = await run_in_threadpool(act_on_ids, FailedTasks(queue), [task_id], verb)
    notify(request, f"{PAST[verb]} task {task_id}." if done else f"Task {task_id} is not failed.")
    return _back(request, task_id, _queue_hint(str(form.get("queue", ""))))


def _back(request: Request, task_id: str, queue_name: str | None) -> Response:
    where = f"/tasks/{quote(task_id, safe='')}"
    if queue_name:
        where += f"?queue={quote(queue_name, safe='')}"
    return RedirectResponse(dashboard(request).url(request, where), 303)


routes = [
    Route("/tasks", lookup, name="lookup"),
    Route("/tasks/{task_id}", task_page, name="task"),
    Route("/tasks/{task_id}/cancel", cancel_action, methods=["POST"]),
    Route("/tasks/{task_id}/retry", retry_action, methods=["POST"]),
    Route("/tasks/{task_id}/forget", forget_action, methods=["POST"]),
]
