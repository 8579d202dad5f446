"""How a run's values show in the report: short text, a sort key, a small DataFrame preview."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..._errors import NotebookExecutorError
from ..._records.scraps import decode_scrap, find_scraps
from ..._records.store import RunStore

__all__ = ["Cell", "Preview", "Previews", "cell_for", "clip", "shown"]

#: Longest text shown in one cell of a table (parameters, scraps, requests, errors).
MAX_CELL_CHARS = 120
#: A DataFrame preview shows at most this many rows and columns, each value clipped.
PREVIEW_ROWS, PREVIEW_COLUMNS, PREVIEW_CHARS = 5, 6, 24


@dataclass(frozen=True)
class Preview:
    """The first rows and columns of a DataFrame scrap, as text."""

    shape: tuple[int, int]
    columns: list[str]
    index: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Cell:
    """One value in a table: its text, a numeric sort key when it is a number, and a preview."""

    text: str
    sort: str | None = None
    preview: Preview | None = None
    present: bool = True


def clip(text: str, limit: int = MAX_CELL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def shown(value: Any) -> str:
    """A value as a person reads it: numbers to six significant digits, summaries named."""
    if isinstance(value, str):
        return value
    number = _number(value)
    if number is not None:
        if isinstance(value, int):
            return str(value)
        return f"{number:.6g}" if math.isfinite(number) else str(number)
    if isinstance(value, Mapping) and "encoder" in value:
        shape = value.get("shape")
        if value.get("type") == "DataFrame" and isinstance(shape, list) and len(shape) == 2:
            return f"DataFrame {shape[0]} \u00d7 {shape[1]}"
        return f"[{value.get('encoder')}]"
    return json.dumps(value, ensure_ascii=False, default=str)


def cell_for(values: Mapping[str, Any], name: str, preview: Preview | None = None) -> Cell:
    """The cell of ``values[name]`` (an empty cell when the run has no such value)."""
    if name not in values:
        return Cell("", present=False)
    value = values[name]
    number = _number(value)
    sort = repr(number) if number is not None and math.isfinite(number) else None
    return Cell(clip(shown(value)), sort, preview)


def _is_frame(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("encoder") == "pandas"


class Previews:
    """Previews of runs' DataFrame scraps, read from their run records through ``store``, each
    run's once however many pages show it (a run without one costs nothing)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._known: dict[str, dict[str, Preview]] = {}

    def __call__(self, run: Mapping[str, Any]) -> dict[str, Preview]:
        names = [name for name, value in (run.get("scraps") or {}).items() if _is_frame(value)]
        if not names:
            return {}
        run_id = str(run["run_id"])
        known = self._known.get(run_id)
        if known is None:
            try:
                cells = self.store.read(run_id).cells
            except NotebookExecutorError:
                cells = []
            known = self._known[run_id] = _frames(find_scraps(cells), names)
        return known


def _item(value: Any) -> str:
    # numpy's integers are not ints, and its floats are floats: both read as numbers here.
    return shown(value) if isinstance(value, float) else str(value)


def _frames(found: Mapping[str, Any], names: Iterable[str]) -> dict[str, Preview]:
    out: dict[str, Preview] = {}
    for name in names:
        scrap = found.get(name)
        if scrap is None or scrap.encoder != "pandas":
            continue
        try:
            frame = decode_scrap(scrap)
        except Exception:  # a damaged payload: the cell keeps its summary text
            continue
        part = frame.iloc[:PREVIEW_ROWS, :PREVIEW_COLUMNS]
        out[name] = Preview(
            shape=(int(frame.shape[0]), int(frame.shape[1])),
            columns=[clip(str(c), PREVIEW_CHARS) for c in part.columns],
            index=[clip(str(i), PREVIEW_CHARS) for i in part.index],
            rows=[[clip(_item(v), PREVIEW_CHARS) for v in row] for row in part.itertuples(False)],
        )
    return out
