"""The batches page: the newest batches with their progress; one batch; cancel, retry."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rqueue.errors import RQueueError
from rqueue.web.auth import action_form, notify
from rqueue.web.state import dashboard
from rqueue.workflows import Batch, batch_of, listed_batches

NEWEST = 100
"""Batches the list shows, newest first (as ``rqueue batches list``)."""


def _batch(request: Request) -> Batch:
    try:
        return batch_of(request.path_params["batch_id"], dashboard(request).queue)
    except ValueError:
        raise HTTPException(404, "no batch with that id") from None


def batches_page(request: Request) -> Response:
    found = dashboard(request)
    return found.pages.render(request, "batches.html", rows=listed_batches(NEWEST, found.queue))


def batch_page(request: Request) -> Response:
    status = _batch(request).status()
    if status is None:
        raise HTTPException(404, "no such batch (expired, pruned, or never dispatched)")
    return dashboard(request).pages.render(request, "batch.html", status=status)


async def cancel_action(request: Request) -> Response:
    await action_form(request)
    found = _batch(request)
    status = await run_in_threadpool(found.status)
    try:
        if status is not None and status.finished:
            # Nothing is left to skip: "Cancelled" would claim an effect it cannot have.
            notify(request, "The batch has finished: there is nothing left to cancel.")
        else:
            cancelled = await run_in_threadpool(found.cancel)
            notify(request, "Cancelled the batch." if cancelled else "It was cancelled already.")
    except RQueueError as exc:
        notify(request, str(exc))
    return RedirectResponse(dashboard(request).url(request, f"/batches/{found.id}"), 303)


async def retry_action(request: Request) -> Response:
    await action_form(request)
    found = _batch(request)
    try:
        retried = await run_in_threadpool(found.retry)
        notify(request, f"Retried {retried} failed member(s).")
    except RQueueError as exc:  # no such batch, or its state does not read
        notify(request, str(exc))
    return RedirectResponse(dashboard(request).url(request, f"/batches/{found.id}"), 303)


routes = [
    Route("/batches", batches_page, name="batches"),
    Route("/batches/{batch_id}", batch_page, name="batch"),
    Route("/batches/{batch_id}/cancel", cancel_action, methods=["POST"]),
    Route("/batches/{batch_id}/retry", retry_action, methods=["POST"]),
]
