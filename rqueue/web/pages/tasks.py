"""A task by id: where it is now, its arguments, attempts, tags, trace id, its kept
status and result or error, its failed record; cancel, retry or forget it.

The status is read as ``rqueue status`` reads it (:mod:`rqueue.store.results`); the
payload (arguments, tags, trace headers) where the task is: running, ready or delayed
near where a list page showed it (``?queue=NAME&at=N``, :func:`rqueue.store.browse.
find_payload`: the lists are windows, never scanned whole), or in its failed record.
Which queue holds it is the one given, else the one with its kept result or its failed
record, else the one whose pending ids hold it.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rqueue.errors import InvalidPayload, InvalidQueueName
from rqueue.failed import FailedTask, FailedTasks
from rqueue.store import browse
from rqueue.store.cancel import cancel, cancel_anywhere
from rqueue.store.keys import validate_queue_name
from rqueue.store.live_events import recent_events
from rqueue.store.progress import read as read_progress
from rqueue.store.queue import RedisQueue
from rqueue.store.results import TaskStatus, find_queue, read_status
from rqueue.web.auth import action_form, notify
from rqueue.web.pages.queue_tasks import offset_of
from rqueue.web.state import dashboard
from rqueue.web.task_lists import decoded, trace_id


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
    status: TaskStatus | None = None
    problem = ""
    queue_name = given or find_queue(queue, task_id)
    if queue_name is not None:
        try:
            status = read_status(queue, queue_name, task_id)
        except InvalidPayload as exc:  # a record altered in Redis
            problem = str(exc)
    if status is not None and status.status == "unknown":  # expired, or keeps none
        status = None
    # Its failed record, if any: in its own queue's list when its queue is known.
    where = [queue_name] if queue_name is not None else None
    failed = FailedTasks(queue).find_all([task_id], where).get(task_id)
    queue_name = queue_name or (failed.queue if failed else browse.pending_in(queue, task_id))
    held = None
    if queue_name is not None:
        held = browse.find_payload(queue, queue_name, task_id, offset_of(request, "at"))
    payload = held.payload if held else failed.payload if failed else None
    _, job, payload_problem = decoded(payload) if payload is not None else ("", None, "")
    pending, cancelled = (
        browse.standing(queue, queue_name, task_id) if queue_name else (False, False)
    )
    state = "cancelled" if cancelled else _state(held, pending, status, failed)
    return found.pages.render(
        request,
        "task.html",
        task_id=task_id,
        queue_name=queue_name,
        state=state,
        held=held,
        job=job,
        payload_problem=payload_problem,
        trace=trace_id(job),
        progress=read_progress(queue, queue_name, task_id) if queue_name else None,
        events=recent_events(queue, queue_name, task_id) if queue_name else [],
        cancellable=pending and state in ("ready", "delayed", "queued"),
        status=status,
        problem=problem,
        failed=failed,
        status_code=404 if state == "" and not problem else 200,
    )


def _state(
    held: browse.Found | None,
    pending: bool,
    status: TaskStatus | None,
    failed: FailedTask | None,
) -> str:
    """Where the task is now, as far as anything says: its payload's place first, then
    its kept status, then its failed record; ``""`` if nothing knows it."""
    if held is not None:
        return held.state
    if pending:
        return "queued"  # ready or delayed, further down its list than was looked
    if status is not None:
        return status.status
    return "failed" if failed is not None else ""


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
    done = await run_in_threadpool(_act, queue, task_id, verb)
    past = {"retry": "Retried", "forget": "Forgot"}[verb]
    notify(request, f"{past} task {task_id}." if done else f"Task {task_id} is not failed.")
    return _back(request, task_id, _queue_hint(str(form.get("queue", ""))))


def _act(queue: RedisQueue, task_id: str, verb: str) -> bool:
    failed = FailedTasks(queue)
    record = failed.find(task_id)
    if record is None:
        return False
    return failed.retry(record) if verb == "retry" else failed.forget(record)


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
