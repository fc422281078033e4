"""The queues page: ready, delayed, reserved and failed counts (each a link to its list
of tasks), the oldest wait, flagged over the queue's limit (``--wait``), and pausing or
resuming a queue (workers skip a paused one; dispatching goes on)."""

from __future__ import annotations

import fnmatch

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rqueue.errors import InvalidQueueName
from rqueue.metrics.read import QueueRow, queue_rows
from rqueue.store.keys import validate_queue_name
from rqueue.web.auth import action_form, notify
from rqueue.web.state import dashboard

MOST_SHOWN = 500
"""Rows on the page; with more queues, a name pattern narrows them down."""


def _rows(request: Request) -> tuple[list[QueueRow], str, int]:
    found = dashboard(request)
    match = request.query_params.get("match", "")
    names = found.queue.known_queues()
    if match:
        names = [name for name in names if fnmatch.fnmatchcase(name, match)]
    return queue_rows(found.queue, names[:MOST_SHOWN]), match, len(names)


def queues_page(request: Request) -> Response:
    rows, match, total = _rows(request)
    found = dashboard(request)
    return found.pages.render(
        request, "queues.html", rows=rows, match=match, total=total, waits=found.waits
    )


def queues_table(request: Request) -> Response:
    """The table alone, which the page's script fetches to keep it current."""
    rows, match, total = _rows(request)
    found = dashboard(request)
    return found.pages.fragment(
        request, "queues_table.html", rows=rows, match=match, total=total, waits=found.waits
    )


async def pause_action(request: Request) -> Response:
    return await _set_paused(request, True)


async def resume_action(request: Request) -> Response:
    return await _set_paused(request, False)


async def _set_paused(request: Request, paused: bool) -> Response:
    form = await action_form(request)
    queue = dashboard(request).queue
    try:
        name = validate_queue_name(str(form.get("queue", "")))
    except InvalidQueueName as exc:
        raise HTTPException(400, str(exc)) from None
    changed = await run_in_threadpool(queue.pause if paused else queue.resume, name)
    verb = "Paused" if paused else "Resumed"
    notify(request, f"{verb} queue {name}." if changed else f"Queue {name} was so already.")
    return RedirectResponse(dashboard(request).url(request, "/queues"), 303)


routes = [
    Route("/queues", queues_page, name="queues"),
    Route("/queues/table", queues_table),
    Route("/queues/pause", pause_action, methods=["POST"]),
    Route("/queues/resume", resume_action, methods=["POST"]),
]
