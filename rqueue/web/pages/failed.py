"""The failed page: search failed tasks, read one's traceback, retry or forget them.

One, the ones ticked, or every one matching the search (see
:mod:`rqueue.web.failed_search` for how that stays a window at a time).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rqueue.errors import InvalidQueueName
from rqueue.failed import FailedTasks
from rqueue.store.keys import validate_queue_name
from rqueue.web.auth import action_form, notify
from rqueue.web.failed_search import Match, forget_matching, retry_matching, search
from rqueue.web.pages.queues import MOST_SHOWN
from rqueue.web.state import dashboard

PAST = {"retry": "Retried", "forget": "Forgot"}
MOST_TICKED = 1000
"""Ids one action takes: a page shows fewer, so more is not a person ticking boxes."""


SEARCHED = ("q", "queue", "task", "tag")
"""The search's fields, in the page's query and in its actions' forms."""


def _match(fields: dict[str, str]) -> Match:
    queue = fields["queue"]
    try:
        queues = (validate_queue_name(queue),) if queue else ()
    except InvalidQueueName as exc:
        raise HTTPException(400, str(exc)) from None
    return Match(fields["q"].strip(), queues, fields["task"].strip(), fields["tag"].strip())


def _searched(values: Mapping[str, object]) -> dict[str, str]:
    """The search's fields from a query or a form (missing ones empty)."""
    return {name: str(values.get(name) or "") for name in SEARCHED}


def _query(fields: dict[str, str], **more: object) -> str:
    """The search as a query string (only the fields given), ``""`` for none."""
    given = {name: value for name, value in {**fields, **more}.items() if value}
    return "?" + urlencode(given) if given else ""


def _offset(value: str | None) -> int:
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0


def failed_page(request: Request) -> Response:
    found = dashboard(request)
    fields = _searched(request.query_params)
    offset = _offset(request.query_params.get("offset"))
    match = _match(fields)
    result = search(FailedTasks(found.queue), match, offset)
    next_link = None
    if result.next_offset is not None:
        next_link = _query(fields, offset=result.next_offset)
    return found.pages.render(
        request,
        "failed.html",
        result=result,
        text=fields["q"],
        queue=fields["queue"],
        searched=fields,
        narrowed=match.scans or bool(match.queues),
        next_link=next_link,
        queues=_choices(found.queue.known_queues()),
    )


def _choices(queues: list[str]) -> list[str] | None:
    """The queues to pick from, or None (a name is typed) past the queues page's
    :data:`~rqueue.web.pages.queues.MOST_SHOWN`: ten thousand options are a page
    no one reads."""
    return queues if len(queues) <= MOST_SHOWN else None


def failed_task_page(request: Request) -> Response:
    found = dashboard(request)
    task_id = request.path_params["task_id"]
    record = FailedTasks(found.queue).find(task_id)
    if record is None:
        raise HTTPException(404, "no failed task with that id")
    return found.pages.render(
        request, "failed_task.html", record=record, job=record.job(found.queue.config.keyring)
    )


async def retry_action(request: Request) -> Response:
    return await _act(request, "retry")


async def forget_action(request: Request) -> Response:
    return await _act(request, "forget")


async def _act(request: Request, verb: str) -> Response:
    form = await action_form(request)
    failed = FailedTasks(dashboard(request).queue)
    fields = _searched(form)
    if form.get("scope") == "matching":
        match = _match(fields)
        act_all = retry_matching if verb == "retry" else forget_matching
        done = await run_in_threadpool(act_all, failed, match)
        what = "matching the search" if match.scans else "in all"
        if match.text and not (match.task or match.tag):
            what = f"matching {match.text!r}"
        notify(request, f"{PAST[verb]} {done} failed task(s) {what}.")
    else:
        ids = _ids(form)
        done = await run_in_threadpool(act_on_ids, failed, ids, verb)
        notify(request, f"{PAST[verb]} {done} of {len(ids)} failed task(s).")
    return RedirectResponse(dashboard(request).url(request, "/failed" + _query(fields)), 303)


def _ids(form: FormData) -> list[str]:
    """The one id of a row's own button, else the ids ticked."""
    one = form.get("one")
    chosen = [one] if one else form.getlist("ids")
    ids = [value for value in chosen if isinstance(value, str) and value]
    if not ids:
        raise HTTPException(400, "no failed task chosen")
    if len(ids) > MOST_TICKED:
        raise HTTPException(400, f"at most {MOST_TICKED} ids per action")
    return list(dict.fromkeys(ids))


def act_on_ids(failed: FailedTasks, ids: list[str], verb: str) -> int:
    """Retry or forget (``verb``) the newest failed record of each id: how many were."""
    found = failed.find_all(ids)  # one scan for all of them
    act = failed.retry_many if verb == "retry" else failed.forget_many
    return act(found.values())


routes = [
    Route("/failed", failed_page, name="failed"),
    Route("/failed/retry", retry_action, methods=["POST"]),
    Route("/failed/forget", forget_action, methods=["POST"]),
    Route("/failed/{task_id}", failed_task_page, name="failed_task"),
]
