"""Charts of numeric scraps as inline SVG: drawn here, so a report needs no script library.

A chart is a small line-and-points plot with its two extreme values labelled on each axis. Every
value that reaches the SVG passes through :func:`html.escape`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Chart", "charts_for", "render_svg"]

#: At most this many charts per report: one per (notebook, scrap) pair, most data first.
MAX_CHARTS = 24
#: Points drawn per chart at most; longer series are thinned evenly (the extremes are kept).
MAX_POINTS = 400

_WIDTH, _HEIGHT = 420, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 58, 14, 26, 40


@dataclass(frozen=True)
class Chart:
    """One chart: ``y`` (a numeric scrap) against ``x`` (run order, or a numeric parameter)."""

    notebook: str
    scrap: str
    x_label: str
    points: tuple[tuple[float, float], ...]

    @property
    def title(self) -> str:
        return f"{self.scrap} by {self.x_label}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def charts_for(runs: Sequence[Mapping[str, Any]]) -> list[Chart]:
    """The charts worth drawing for ``runs`` (result dicts, any order).

    For each notebook and numeric scrap seen in at least two runs: the scrap across runs in
    start order, and, where a numeric parameter takes several values among those runs (a
    sweep), the scrap against that parameter.
    """
    by_key: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for run in sorted(runs, key=lambda r: str(r.get("started_at") or "")):
        for name, value in (run.get("scraps") or {}).items():
            if _number(value) is not None:
                by_key.setdefault((str(run.get("notebook")), str(name)), []).append(run)
    charts: list[Chart] = []
    for (notebook, scrap), series in sorted(by_key.items(), key=lambda kv: -len(kv[1])):
        if len(series) < 2:
            continue
        order = [
            (float(i + 1), _number(run["scraps"][scrap]) or 0.0) for i, run in enumerate(series)
        ]
        charts.append(Chart(notebook, scrap, "run (oldest first)", tuple(order)))
        for parameter in _swept_parameters(series):
            pairs = sorted(
                (x, y)
                for run in series
                if (x := _number((run.get("parameters") or {}).get(parameter))) is not None
                and (y := _number(run["scraps"][scrap])) is not None
            )
            charts.append(Chart(notebook, scrap, parameter, tuple(pairs)))
        if len(charts) >= MAX_CHARTS:
            break
    return charts[:MAX_CHARTS]


def _swept_parameters(series: Sequence[Mapping[str, Any]]) -> list[str]:
    values: dict[str, set[float]] = {}
    for run in series:
        for name, value in (run.get("parameters") or {}).items():
            number = _number(value)
            if number is not None:
                values.setdefault(str(name), set()).add(number)
    return sorted(name for name, seen in values.items() if len(seen) >= 3)[:2]


def _thin(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(points) <= MAX_POINTS:
        return list(points)
    step = (len(points) - 1) / (MAX_POINTS - 1)
    return [points[round(i * step)] for i in range(MAX_POINTS)]


def _span(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    if low == high:
        pad = abs(low) * 0.1 or 1.0
        return low - pad, high + pad
    return low, high


def _label(value: float) -> str:
    return f"{value:.4g}"


def render_svg(chart: Chart) -> str:
    """The chart as an ``<svg>`` element (no script, no external reference)."""
    points = _thin(chart.points)
    x_low, x_high = _span([x for x, _ in points])
    y_low, y_high = _span([y for _, y in points])
    inner_w = _WIDTH - _LEFT - _RIGHT
    inner_h = _HEIGHT - _TOP - _BOTTOM

    def place(x: float, y: float) -> tuple[float, float]:
        return (
            _LEFT + (x - x_low) / (x_high - x_low) * inner_w,
            _TOP + (1 - (y - y_low) / (y_high - y_low)) * inner_h,
        )

    placed = [place(x, y) for x, y in points]
    path = " ".join(f"{px:.1f},{py:.1f}" for px, py in placed)
    dots = "".join(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5"/>' for px, py in placed)
    esc = html.escape
    bottom = _TOP + inner_h
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
        f'width="{_WIDTH}" height="{_HEIGHT}" role="img" aria-label="{esc(chart.title)}" '
        f'data-notebook="{esc(chart.notebook)}" data-scrap="{esc(chart.scrap)}" '
        f'data-points="{len(points)}">'
        f'<text class="title" x="{_LEFT}" y="16">{esc(chart.title)}</text>'
        f'<line class="axis" x1="{_LEFT}" y1="{bottom}" x2="{_WIDTH - _RIGHT}" y2="{bottom}"/>'
        f'<line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{bottom}"/>'
        f'<text class="tick" x="{_LEFT - 4}" y="{_TOP + 4}" text-anchor="end">'
        f"{esc(_label(y_high))}</text>"
        f'<text class="tick" x="{_LEFT - 4}" y="{bottom}" text-anchor="end">'
        f"{esc(_label(y_low))}</text>"
        f'<text class="tick" x="{_LEFT}" y="{bottom + 14}">{esc(_label(x_low))}</text>'
        f'<text class="tick" x="{_WIDTH - _RIGHT}" y="{bottom + 14}" text-anchor="end">'
        f"{esc(_label(x_high))}</text>"
        f'<text class="tick" x="{_LEFT + inner_w / 2:.0f}" y="{bottom + 30}" '
        f'text-anchor="middle">{esc(chart.x_label)}</text>'
        f'<polyline class="line" points="{path}"/><g class="dots">{dots}</g></svg>'
    )
