"""Rates over time as SVG line charts, drawn on the server: the console needs no chart
script, no build step and nothing fetched by the browser.

Layer: console. Pure functions from numbers to SVG text; no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
Point = tuple[int, float]  # (epoch ms, value)


def _nice_top(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value`` (an axis top)."""
    if value <= 0:
        return 1.0
    step = 1.0
    while step * 10 <= value:
        step *= 10
    while step > value:
        step /= 10
    for factor in (1, 2, 5, 10):
        if step * factor >= value:
            return step * factor
    return step * 10


def _label(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _time_label(ms: int, span_ms: int) -> str:
    fmt = "%H:%M:%S" if span_ms < 3_600_000 else "%m-%d %H:%M"
    return time.strftime(fmt, time.localtime(ms / 1000))


def line_chart(
    series: Mapping[str, Sequence[Point]],
    *,
    title: str,
    unit: str,
    width: int = 720,
    height: int = 220,
) -> str:
    """An SVG chart of each series (name -> points in time order), one colour each, a
    legend, a y axis from 0 and a time axis with five labels. No points: a frame saying so."""
    left, right, top, bottom = 56, 12, 28, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    points = [p for values in series.values() for p in values]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="16" class="chart-title">{escape(title)} ({escape(unit)})</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#ccc"/>',
    ]
    if not points:
        parts.append(
            f'<text x="{left + plot_w // 2}" y="{top + plot_h // 2}" text-anchor="middle" '
            'fill="#888">no data</text></svg>'
        )
        return "".join(parts)
    x0 = min(p[0] for p in points)
    x1 = max(p[0] for p in points)
    span = max(x1 - x0, 1)
    y_top = _nice_top(max(p[1] for p in points))

    def x_of(ms: int) -> float:
        return left + (ms - x0) / span * plot_w

    def y_of(value: float) -> float:
        return top + plot_h - value / y_top * plot_h

    for i in range(5):
        value = y_top * i / 4
        y = y_of(value)
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">'
            f"{_label(value)}</text>"
        )
        ms = x0 + span * i // 4
        anchor = ("start", "middle", "middle", "middle", "end")[i]
        parts.append(
            f'<text x="{x_of(ms):.1f}" y="{height - 8}" text-anchor="{anchor}" class="axis">'
            f"{_time_label(ms, span)}</text>"
        )
    legend_x = left + plot_w
    for index, (name, values) in enumerate(series.items()):
        colour = COLOURS[index % len(COLOURS)]
        if values:
            path = " ".join(f"{x_of(ms):.1f},{y_of(v):.1f}" for ms, v in values)
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}">'
                f"<title>{escape(name)}</title></polyline>"
            )
        parts.append(
            f'<text x="{legend_x}" y="{16 + 0 * index}" dx="{-110 * index}" text-anchor="end" '
            f'fill="{colour}" class="legend">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
