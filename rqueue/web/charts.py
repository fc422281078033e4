"""Line charts drawn on the server as SVG: no JavaScript library, no build step.

A chart is a few ``<path>`` elements, one per series (a queue), scaled into a fixed
view box that the browser stretches to the page's width. Every number is checked
(a value read from Redis may be NaN, infinite or negative) and every label is
escaped here, because the SVG goes into the page as markup.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from html import escape

from markupsafe import Markup

WIDTH, HEIGHT = 600, 180
LEFT, RIGHT, TOP, BOTTOM = 48, 8, 10, 22
"""Margins of the plot inside the view box: room for the axis labels."""
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")

Points = Sequence[tuple[float, float]]
"""``(unix seconds, value)`` pairs, oldest first."""


def line_chart(
    title: str, series: Mapping[str, Points], start: float, end: float, unit: str = ""
) -> Markup:
    """One chart of every series from ``start`` to ``end`` (Unix seconds)."""
    clean = {name: _finite(points, start, end) for name, points in series.items()}
    clean = {name: points for name, points in clean.items() if points}
    peak = max((v for points in clean.values() for _, v in points), default=0.0)
    top = _nice_ceiling(peak)
    span = max(end - start, 1e-9)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + (t - start) / span * plot_w

    def y(v: float) -> float:
        return TOP + plot_h - v / top * plot_h

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" preserveAspectRatio="none">',
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" '
        f'y2="{TOP + plot_h}"/>',
        f'<line class="grid" x1="{LEFT}" y1="{TOP}" x2="{WIDTH - RIGHT}" y2="{TOP}"/>',
        f'<text class="label" x="{LEFT - 4}" y="{TOP + 4}" text-anchor="end">'
        f"{escape(_number(top))}{escape(unit)}</text>",
        f'<text class="label" x="{LEFT - 4}" y="{TOP + plot_h}" text-anchor="end">0</text>',
        f'<text class="label" x="{LEFT}" y="{HEIGHT - 6}">{_clock(start)}</text>',
        f'<text class="label" x="{WIDTH - RIGHT}" y="{HEIGHT - 6}" text-anchor="end">'
        f"{_clock(end)} UTC</text>",
    ]
    for index, (name, points) in enumerate(sorted(clean.items())):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(
            f"{'M' if i == 0 else 'L'}{x(t):.1f},{y(v):.1f}" for i, (t, v) in enumerate(points)
        )
        parts.append(
            f'<path class="series" data-series="{escape(name)}" d="{path}" stroke="{colour}">'
            f"<title>{escape(name)}</title></path>"
        )
        if len(points) == 1:  # a path of one point draws nothing: mark it
            t, v = points[0]
            parts.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}"/>')
    if not clean:
        parts.append(
            f'<text class="empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
            "no data in this window</text>"
        )
    parts.append("</svg>")
    legend = "".join(
        f'<li><span class="swatch" style="background:{COLOURS[i % len(COLOURS)]}"></span>'
        f"{escape(name)}</li>"
        for i, name in enumerate(sorted(clean))
    )
    return Markup(
        f'<figure class="chart-box"><figcaption>{escape(title)}</figcaption>'
        f'{"".join(parts)}<ul class="legend">{legend}</ul></figure>'
    )


def _finite(points: Points, start: float, end: float) -> list[tuple[float, float]]:
    """The points inside the window whose time and value are real, non-negative numbers."""
    kept = []
    for t, v in points:
        if math.isfinite(t) and math.isfinite(v) and v >= 0 and start <= t <= end:
            kept.append((t, v))
    return sorted(kept)


def _nice_ceiling(value: float) -> float:
    """The top of the y axis: 1, 2 or 5 times a power of ten, at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return float(step * power)
    return float(10 * power)


def _number(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _clock(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%H:%M")
