"""Charts of numeric scraps as inline SVG: drawn here, so a report needs no script library.

A chart is a small plot with round tick values on both axes, labelled compactly (``16.4k``) and
given room enough never to be cut: a scrap across runs is a line through its points, in run
order; a scrap against a parameter is points only (runs that share a parameter's value differ in
others: no order joins them). Modified runs (docs/how-to/modified-runs.md) ran other code than the
template:
they are left out of its charts. The SVG comes from a template with autoescape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .assets import render

__all__ = ["Chart", "charts_for", "nice_ticks", "render_svg", "tick_labels"]

#: At most this many charts per notebook: one per scrap (and swept parameter), most data first.
MAX_CHARTS = 6
#: A line joins the points of a chart of at most this many points.
MAX_LINE_POINTS = 60
#: Points drawn per chart at most; longer series are thinned evenly (the extremes are kept).
MAX_POINTS = 400

_WIDTH, _HEIGHT = 360, 190
_TOP, _BOTTOM = 26, 40


@dataclass(frozen=True)
class Chart:
    """One chart: ``y`` (a numeric scrap) against ``x`` (run order, or a numeric parameter)."""

    notebook: str
    scrap: str
    x_label: str
    points: tuple[tuple[float, float], ...]
    #: Whether a line joins the points (in their order): runs in order, not a parameter.
    joined: bool = True

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
    sweep), the scrap against that parameter (points, not joined). A modified run (its
    ``edited_cells``) is none of the template's runs: it is left out.
    """
    by_key: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    plain = [run for run in runs if not run.get("edited_cells")]
    for run in sorted(plain, key=lambda r: str(r.get("started_at") or "")):
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
            charts.append(Chart(notebook, scrap, parameter, tuple(pairs), joined=False))
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


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[low, high]``: about ``count`` of them, a step of 1, 2, 2.5
    or 5 times a power of ten, the first at or below ``low`` and the last at or above ``high``."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0, 1.0]
    if high < low:
        low, high = high, low
    if high == low:
        pad = abs(low) * 0.1 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * 0.999)
    first = math.floor(low / step + 1e-9) * step
    last = math.ceil(high / step - 1e-9) * step
    ticks = [first + i * step for i in range(round((last - first) / step) + 1)]
    # Rounding noise (0.30000000000000004) would show in labels: snap to the step's precision.
    digits = max(0, -math.floor(math.log10(step)) + 2)
    return [round(t, digits) + 0.0 for t in ticks]


_SUFFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Short labels for evenly spaced ``ticks``: ``16.4k``, ``2.5M``, ``0.25``, ``1e-06``; as
    many decimals as the step needs and no more, so neighbours never read alike."""
    if len(ticks) < 2:
        return [f"{t:.4g}" for t in ticks]
    step = abs(ticks[1] - ticks[0]) or 1.0
    largest = max(abs(t) for t in ticks)
    if largest and (largest < 1e-3 or largest >= 1e15):
        return [f"{t:.{_decimals(step / 10 ** math.floor(math.log10(largest)))}e}" for t in ticks]
    scale, suffix = next(((s, n) for s, n in _SUFFIXES if largest >= 10 * s), (1.0, ""))
    decimals = _decimals(step / scale)
    if decimals > 2 and scale > 1:  # close values of a large number: whole digits read better
        scale, suffix, decimals = 1.0, "", _decimals(step)
    return [f"{t / scale:,.{decimals}f}{suffix}" if t else "0" for t in ticks]


def _decimals(step: float) -> int:
    """Decimals that tell apart values ``step`` apart (at most six)."""
    if step >= 1:
        return 0 if abs(step - round(step)) < 1e-9 else 1
    decimals = -math.floor(math.log10(step) + 1e-9)
    if abs(step * 10**decimals - round(step * 10**decimals)) > 1e-6:
        decimals += 1
    return min(decimals, 6)


@dataclass(frozen=True)
class _Tick:
    at: float
    label: str


def _layout(chart: Chart) -> dict[str, Any]:
    """Everything the chart template draws, in pixels."""
    points = _thin(chart.points)
    xs, ys = [x for x, _ in points], [y for _, y in points]
    x_ticks = nice_ticks(min(xs), max(xs), 6)
    if chart.x_label.startswith("run "):  # run numbers are whole
        x_ticks = [t for t in x_ticks if t == int(t)] or x_ticks
    y_ticks = nice_ticks(min(ys), max(ys), 5)
    y_labels = tick_labels(y_ticks)
    x_labels = tick_labels(x_ticks)
    # The left margin fits the longest y label (about 6.5 px a character at 11 px).
    left = 14 + round(6.5 * max(len(label) for label in y_labels))
    right = 14 + round(3.3 * len(x_labels[-1]))
    x_low, x_high = min(x_ticks[0], min(xs)), max(x_ticks[-1], max(xs))
    y_low, y_high = y_ticks[0], y_ticks[-1]
    inner_w, inner_h = _WIDTH - left - right, _HEIGHT - _TOP - _BOTTOM
    bottom = _TOP + inner_h

    def px(x: float) -> float:
        return left + (x - x_low) / ((x_high - x_low) or 1.0) * inner_w

    def py(y: float) -> float:
        return _TOP + (1 - (y - y_low) / ((y_high - y_low) or 1.0)) * inner_h

    placed = [(round(px(x), 1), round(py(y), 1)) for x, y in points]
    return {
        "chart": chart,
        "width": _WIDTH,
        "height": _HEIGHT,
        "left": left,
        "right": _WIDTH - right,
        "top": _TOP,
        "bottom": bottom,
        "middle": round(left + inner_w / 2),
        "count": len(points),
        "x_ticks": [_Tick(round(px(t), 1), s) for t, s in zip(x_ticks, x_labels, strict=True)],
        "y_ticks": [_Tick(round(py(t), 1), s) for t, s in zip(y_ticks, y_labels, strict=True)],
        # Past this many points a line joining them in run order is a scribble: dots only.
        "path": " ".join(f"{x},{y}" for x, y in placed)
        if chart.joined and len(placed) <= MAX_LINE_POINTS
        else "",
        "dots": placed,
    }


def render_svg(chart: Chart) -> str:
    """The chart as an SVG element (no script, no external reference), from the
    ``chart.svg.j2`` template: labels are escaped there."""
    return render("chart.svg.j2", **_layout(chart))
