"""The overview: throughput, failures, wait and runtime per queue, the last hour or day.

From :func:`rqueue.metrics.queue_series` (a point a minute per queue; one round trip
per queue). A day is drawn in ten-minute steps: 144 points a line instead of 1,440.
The page fetches its charts again every few seconds (``static/live.js``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rqueue.errors import InvalidQueueName
from rqueue.metrics import MinutePoint, list_workers, queue_series
from rqueue.store.keys import validate_queue_name
from rqueue.store.queue import RedisQueue
from rqueue.web.charts import Points, line_chart
from rqueue.web.state import dashboard

MOST_CHARTED = 8
"""Queues drawn at once: more lines than this no one can tell apart."""


@dataclass(frozen=True)
class Window:
    label: str
    minutes: int
    step: int
    """Minutes per point drawn."""
    refresh_ms: int
    """How often the page fetches the charts again: a day's points move slowly."""


WINDOWS = {
    "hour": Window("last hour", 60, 1, 5_000),
    "day": Window("last day", 24 * 60, 10, 60_000),
}


@dataclass(frozen=True)
class Measure:
    title: str
    unit: str
    value: Callable[[Sequence[MinutePoint]], float | None]
    """One drawn point from the minutes of its step."""


def _per_minute(read: Callable[[MinutePoint], int]) -> Callable[[Sequence[MinutePoint]], float]:
    return lambda points: sum(read(p) for p in points) / len(points)


def _worst(
    read: Callable[[MinutePoint], float | None],
) -> Callable[[Sequence[MinutePoint]], float | None]:
    """The highest of the step's minutes: a bad minute stays visible in a day's view."""

    def value(points: Sequence[MinutePoint]) -> float | None:
        found = [v for v in (read(p) for p in points) if v is not None]
        return max(found) if found else None

    return value


MEASURES = (
    Measure("Processed per minute", "", _per_minute(lambda p: p.processed)),
    Measure("Failed attempts per minute", "", _per_minute(lambda p: p.failed + p.retried)),
    Measure("Wait, 95th percentile", " s", _worst(lambda p: p.wait_p95)),
    Measure("Runtime, 95th percentile", " s", _worst(lambda p: p.runtime_p95)),
)


def charted_queues(queue: RedisQueue, chosen: Sequence[str]) -> tuple[list[str], int]:
    """The queues to draw (those chosen, else the first known ones) and how many are known."""
    known = queue.known_queues()
    names = [name for name in chosen if name in known] if chosen else known
    return names[:MOST_CHARTED], len(known)


def charts(
    queue: RedisQueue, names: Sequence[str], window: Window, task: str | None = None
) -> list[Markup]:
    """The four measures of ``names`` over ``window``, a line per queue: every task's,
    or only ``task``'s (its own page, :mod:`rqueue.web.pages.task_names`)."""
    end = time.time()
    series = {name: queue_series(queue, name, window.minutes, task, end) for name in names}
    drawn = []
    for measure in MEASURES:
        lines: dict[str, Points] = {}
        for name, minutes in series.items():
            points = []
            for start in range(0, len(minutes), window.step):
                step = minutes[start : start + window.step]
                value = measure.value(step)
                if value is not None:
                    points.append((float(step[0].minute), value))
            lines[name] = points
        first = float(series[names[0]][0].minute) if names else end - window.minutes * 60
        drawn.append(line_chart(measure.title, lines, first, end, measure.unit))
    return drawn


def choice(request: Request) -> tuple[Window, str, list[str]]:
    """The window (``?window=hour|day``) and the valid queues chosen (``?queue=``)."""
    key = request.query_params.get("window", "hour")
    chosen = []
    for name in request.query_params.getlist("queue"):
        try:
            chosen.append(validate_queue_name(name))
        except InvalidQueueName:
            continue
    return WINDOWS.get(key, WINDOWS["hour"]), key if key in WINDOWS else "hour", chosen


def _context(request: Request) -> dict[str, Any]:
    queue = dashboard(request).queue
    window, key, chosen = choice(request)
    names, known = charted_queues(queue, chosen)
    workers = list_workers(queue)
    return {
        "charts": charts(queue, names, window),
        "window": window,
        "window_key": key,
        "windows": WINDOWS,
        "names": names,
        "chosen": chosen,
        "known": known,
        "workers": len(workers),
        "children": sum(w.processes for w in workers),
        "running": sum(len(w.tasks) for w in workers),
        "query": request.url.query,
    }


def overview_page(request: Request) -> Response:
    return dashboard(request).pages.render(request, "overview.html", **_context(request))


def overview_charts(request: Request) -> Response:
    """The charts alone, which the page's script fetches to keep them current."""
    return dashboard(request).pages.fragment(request, "overview_charts.html", **_context(request))


routes = [
    Route("/", overview_page, name="overview"),
    Route("/overview/charts", overview_charts),
]
