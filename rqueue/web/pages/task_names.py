"""A page per task name: its throughput, failures, wait and runtime over time, its
all-time counts per queue, and its recent failures.

The charts are the overview's (:func:`rqueue.web.pages.overview.charts`) drawn from
that task's counts alone, a line per queue it ran on; the metrics keep each task's
counts per queue and minute already, so nothing new is written for this page. Its
recent failures are a search of the failed lists by task name that reads at most
:data:`FAILURES_SCANNED` records, newest first.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rqueue.failed import FailedTasks
from rqueue.metrics.read import totals_of
from rqueue.metrics.schema import TaskCounts
from rqueue.store.queue import RedisQueue
from rqueue.web.failed_search import Match, search
from rqueue.web.pages.overview import MOST_CHARTED, WINDOWS, charts, choice
from rqueue.web.state import dashboard

RECENT_FAILURES = 20
"""Failures the page lists, newest first."""
FAILURES_SCANNED = 10_000
"""Failed records read at most to find them: a page load stays well under a second."""


def queues_of(queue: RedisQueue, task: str) -> dict[str, TaskCounts]:
    """The known queues ``task`` ran on, with its all-time counts on each (one
    pipeline of every queue's totals)."""
    found = totals_of(queue, queue.known_queues())
    return {name: by_task[task] for name, by_task in found.items() if task in by_task}


def task_name_page(request: Request) -> Response:
    found = dashboard(request)
    task = request.path_params["task"]
    window, key, chosen = choice(request)
    counts = queues_of(found.queue, task)
    names = [name for name in chosen if name in counts] if chosen else list(counts)
    failures = search(
        FailedTasks(found.queue),
        Match(task=task),
        0,
        RECENT_FAILURES,
        most_scanned=FAILURES_SCANNED,
    )
    return found.pages.render(
        request,
        "task_name.html",
        task=task,
        counts=counts,
        charts=charts(found.queue, names[:MOST_CHARTED], window, task),
        charted=names[:MOST_CHARTED],
        window_key=key,
        windows=WINDOWS,
        failures=failures,
        failed_link=f"/failed?task={quote(task, safe='')}",
    )


routes = [Route("/task-names/{task:path}", task_name_page, name="task_name")]
