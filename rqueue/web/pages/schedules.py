"""The schedules page: every schedule, its next runs; pause, resume, run now."""

from __future__ import annotations

from datetime import datetime

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rqueue.errors import RQueueError
from rqueue.metrics.registry import served_queues
from rqueue.schedules import Schedule, Schedules
from rqueue.web.auth import action_form, notify, route_path
from rqueue.web.state import dashboard

ACTIONS = ("pause", "resume", "run-now")
NEXT_RUNS = 3
"""Fire times shown per schedule."""


def next_runs(schedule: Schedule) -> list[datetime]:
    """The next few fire times; none for a definition whose timing does not parse (one
    altered in Redis), which the page shows rather than failing on."""
    try:
        return schedule.next_runs(NEXT_RUNS)
    except (RQueueError, ValueError, OverflowError):
        return []


def schedules_page(request: Request) -> Response:
    """Every schedule with its state now: overdue, or on a queue no worker serves, and
    a record that does not read as unreadable (its row, and the rest as usual)."""
    found = dashboard(request)
    schedules = Schedules(found.queue)
    now, served = schedules.now_ms(), served_queues(found.queue)
    rows = [(s, s.standing(now, served), next_runs(s)) for s in schedules.list()]
    return found.pages.render(request, "schedules.html", rows=rows)


async def schedule_action(request: Request) -> Response:
    form = await action_form(request)
    schedules = Schedules(dashboard(request).queue)
    name, action = str(form.get("name", "")), route_path(request).rpartition("/")[2]
    try:
        if action == "pause":
            await run_in_threadpool(schedules.pause, name)
            notify(request, f"Paused schedule {name}.")
        elif action == "resume":
            await run_in_threadpool(schedules.resume, name)
            notify(request, f"Resumed schedule {name}.")
        elif action == "run-now":
            task_id = await run_in_threadpool(schedules.run_now, name)
            notify(request, f"Enqueued {name} now as task {task_id}.")
    except RQueueError as exc:  # no such schedule, or one not signed with our secret
        notify(request, f"Could not {action} {name}: {exc}")
    return RedirectResponse(dashboard(request).url(request, "/schedules"), 303)


routes = [
    Route("/schedules", schedules_page, name="schedules"),
    *(Route(f"/schedules/{action}", schedule_action, methods=["POST"]) for action in ACTIONS),
]
