"""Breadcrumbs: what earlier runs of a notebook found, summarised from the catalog in one pass.

:func:`digest` reads one row per run (oldest first) with the few columns it needs, the
failed cell's index, name and value picked out of its JSON by SQLite (a traceback is never
parsed), and folds them into a :class:`Digest`: runs by status, parameter values tried,
the latest successful run's scraps and how each numeric scrap moved, errors grouped by notebook,
kind, cell and name, and the requests and edit notes, newest first. Every item names run ids
that ``get_run`` and ``search`` accept. The markdown page is written by
:mod:`notebook_executor._catalog.digest_text`.

At 10,000 runs the whole digest takes about 60 ms (``benchmarks/bench_catalog.py``): the query
and the parameters and scraps parsed as one JSON array each (several times faster than a
``json.loads`` per row), then one loop in Python.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "MAX_ITEMS",
    "MAX_VALUES",
    "Digest",
    "DigestError",
    "DigestNote",
    "DigestParameter",
    "DigestScraps",
    "DigestStatus",
    "DigestTrend",
    "DigestValue",
    "digest_rows",
    "fold",
]

#: Most items a list of the digest holds; the others are counted in ``omitted``.
MAX_ITEMS = 50
#: Most values listed for a parameter tried as a set (the most recent ones).
MAX_VALUES = 12
#: A parameter with more distinct numbers than this is shown as a range.
_SET_AT_MOST = 8


class DigestStatus(TypedDict):
    """Runs of one status, with the first and the last of them."""

    status: str
    count: int
    first_at: str
    first_run_id: str
    last_at: str
    last_run_id: str


class DigestValue(TypedDict):
    """One value a parameter took: in how many runs, and the last of them."""

    value: Any
    runs: int
    last_run_id: str


class DigestParameter(TypedDict):
    """The values one parameter of one notebook took: a range of numbers, or a set.

    ``min``/``max`` and their run ids are given when every value is a number; ``values`` lists
    the most recent distinct values for a set (``more_values`` counts the others), and is empty
    for a range.
    """

    notebook: str
    name: str
    kind: Literal["range", "set"]
    runs: int
    distinct: int
    min: float | None
    max: float | None
    min_run_id: str | None
    max_run_id: str | None
    values: list[DigestValue]
    more_values: int


class DigestScraps(TypedDict):
    """The JSON scraps of a notebook's latest successful run."""

    notebook: str
    run_id: str
    started_at: str
    scraps: dict[str, Any]


class DigestTrend(TypedDict):
    """How one numeric scrap moved across the runs that recorded it (oldest to newest)."""

    notebook: str
    name: str
    runs: int
    first: float
    first_run_id: str
    last: float
    last_run_id: str
    min: float
    min_run_id: str
    max: float
    max_run_id: str


class DigestError(TypedDict):
    """Failed runs grouped by notebook, error kind, cell and exception name.

    ``evalue`` is the last run's; ``run_ids`` the newest few, ``last_run_id`` first.
    """

    notebook: str
    error_kind: str | None
    ename: str | None
    evalue: str | None
    cell: int | None
    count: int
    first_at: str
    last_at: str
    last_run_id: str
    run_ids: list[str]


class DigestNote(TypedDict):
    """A request, or an edit note, with the newest run that carried it and how many did."""

    kind: Literal["request", "edit"]
    text: str
    cell: int | None
    notebook: str
    run_id: str
    started_at: str
    status: str
    runs: int


class Digest(TypedDict):
    """What :meth:`NotebookExecutor.digest <notebook_executor.NotebookExecutor.digest>` returns.

    ``text`` is the same digest as markdown, within the ``limit_chars`` asked for. ``omitted``
    counts, per list, the items left out of it (each list holds at most :data:`MAX_ITEMS`).
    """

    notebook: str | None
    since: str | None
    runs: int
    statuses: list[DigestStatus]
    parameters: list[DigestParameter]
    scraps: list[DigestScraps]
    trends: list[DigestTrend]
    errors: list[DigestError]
    notes: list[DigestNote]
    omitted: dict[str, int]
    text: str


_COLUMNS = (
    "run_id, notebook, status, started_at, request, error_kind, parameters, scrap_values, "
    "edit_notes, json_extract(failed_cell, '$.index'), json_extract(failed_cell, '$.ename'), "
    "json_extract(failed_cell, '$.evalue')"
)
_ERROR_VALUE_CHARS = 300
_RUN_IDS_PER_ERROR = 5


def digest_rows(
    conn: sqlite3.Connection, where: str, values: Sequence[Any]
) -> list[tuple[Any, ...]]:
    """The rows :func:`fold` reads, oldest run first; ``where`` as ``sql.filters`` builds it."""
    sql = f"SELECT {_COLUMNS} FROM runs{where} ORDER BY started_at, run_id"
    return conn.execute(sql, list(values)).fetchall()


def fold(rows: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    """The digest's lists (all but ``notebook``, ``since`` and ``text``) from ``rows``."""
    if rows:
        columns = list(zip(*rows, strict=True))
        parameters = _json_array(columns[6])
        scraps = _json_array(columns[7])
    else:
        parameters = scraps = []
    statuses: dict[str, DigestStatus] = {}
    # (notebook, name, value's key) -> [value, runs, index of the first row, of the last].
    tried: dict[tuple[str, str, Any], list[Any]] = {}
    latest: dict[str, DigestScraps] = {}
    trends: dict[tuple[str, str], DigestTrend] = {}
    errors: dict[tuple[Any, ...], DigestError] = {}
    # (kind, notebook, cell, text) -> [runs, index of the newest row]; items built for the
    # newest MAX_ITEMS only (every run of a sweep may have a request of its own).
    notes: dict[tuple[Any, ...], list[int]] = {}
    for at, (row, params, scrap) in enumerate(zip(rows, parameters, scraps, strict=True)):
        run_id, notebook, status, started, request, kind, _, _, edit_notes = row[:9]
        _count_status(statuses, status, started, run_id)
        for name, value in params.items():
            # Scalars are their own key, with their type (1, 1.0 and True are three values).
            kind_of = type(value)
            key = (
                notebook,
                name,
                (kind_of, value) if kind_of in _SCALARS else json.dumps(value, sort_keys=True),
            )
            seen = tried.get(key)
            if seen is None:
                tried[key] = [value, 1, at, at]
            else:
                seen[1] += 1
                seen[3] = at
        if status == "success":
            latest[notebook] = {
                "notebook": notebook,
                "run_id": run_id,
                "started_at": started,
                "scraps": scrap,
            }
        for name, value in scrap.items():
            if type(value) in _NUMBERS and value == value:  # bool is not a number here; NaN
                _move(trends, notebook, name, float(value), run_id)
        if status == "error":
            cell, ename, evalue = row[9:12]
            group = (notebook, kind, cell, ename)
            failed = errors.get(group)
            if failed is None:
                failed = errors[group] = {
                    "notebook": notebook,
                    "error_kind": kind,
                    "ename": ename,
                    "evalue": None,
                    "cell": cell if isinstance(cell, int) else None,
                    "count": 0,
                    "first_at": started,
                    "last_at": started,
                    "last_run_id": run_id,
                    "run_ids": [],
                }
            failed["count"] += 1
            failed["last_at"], failed["last_run_id"] = started, run_id
            failed["evalue"] = None if evalue is None else str(evalue)[:_ERROR_VALUE_CHARS]
            failed["run_ids"] = [run_id, *failed["run_ids"][: _RUN_IDS_PER_ERROR - 1]]
        if request:
            _note(notes, ("request", notebook, None, request), at)
        if edit_notes and edit_notes != "[]":
            for edit in json.loads(edit_notes):
                text = edit.get("note") or request
                if text:
                    _note(notes, ("edit", notebook, edit.get("index"), text), at)
    # Most frequent first; equal counts, the most recent first.
    ordered_errors = sorted(errors.values(), key=lambda e: (e["count"], e["last_at"]), reverse=True)
    lists: dict[str, list[Any]] = {
        "statuses": sorted(statuses.values(), key=lambda s: -s["count"]),
        "parameters": _parameters(tried, rows),
        "scraps": sorted(latest.values(), key=lambda s: s["started_at"], reverse=True),
        "trends": list(trends.values()),
        "errors": ordered_errors,
        "notes": sorted(notes.items(), key=lambda item: item[1][1], reverse=True),
    }
    omitted = {
        name: len(items) - MAX_ITEMS for name, items in lists.items() if len(items) > MAX_ITEMS
    }
    folded: dict[str, Any] = {name: items[:MAX_ITEMS] for name, items in lists.items()}
    folded["notes"] = [_note_item(key, count, rows[at]) for key, (count, at) in folded["notes"]]
    folded["runs"] = len(rows)
    folded["omitted"] = omitted
    return folded


def _json_array(texts: Sequence[Any]) -> list[dict[str, Any]]:
    # One parse of one JSON array: several times faster than a json.loads per row.
    joined = ",".join(text if isinstance(text, str) and text else "{}" for text in texts)
    parsed = json.loads("[" + joined + "]")
    return [value if isinstance(value, dict) else {} for value in parsed]


_SCALARS = frozenset({str, int, float, bool, type(None)})
_NUMBERS = frozenset({int, float})


def _count_status(found: dict[str, DigestStatus], status: str, started: str, run_id: str) -> None:
    entry = found.get(status)
    if entry is None:
        found[status] = {
            "status": status,
            "count": 1,
            "first_at": started,
            "first_run_id": run_id,
            "last_at": started,
            "last_run_id": run_id,
        }
        return
    entry["count"] += 1
    entry["last_at"], entry["last_run_id"] = started, run_id


def _move(
    trends: dict[tuple[str, str], DigestTrend], notebook: str, name: str, value: float, run_id: str
) -> None:
    trend = trends.get((notebook, name))
    if trend is None:
        trends[(notebook, name)] = {
            "notebook": notebook,
            "name": name,
            "runs": 1,
            "first": value,
            "first_run_id": run_id,
            "last": value,
            "last_run_id": run_id,
            "min": value,
            "min_run_id": run_id,
            "max": value,
            "max_run_id": run_id,
        }
        return
    trend["runs"] += 1
    trend["last"], trend["last_run_id"] = value, run_id
    if value < trend["min"]:
        trend["min"], trend["min_run_id"] = value, run_id
    if value > trend["max"]:
        trend["max"], trend["max_run_id"] = value, run_id


def _note(notes: dict[tuple[Any, ...], list[int]], key: tuple[Any, ...], at: int) -> None:
    seen = notes.get(key)
    if seen is None:
        notes[key] = [1, at]
    else:
        seen[0] += 1
        seen[1] = at


def _note_item(key: tuple[Any, ...], runs: int, row: tuple[Any, ...]) -> DigestNote:
    kind, notebook, cell, text = key
    return {
        "kind": kind,
        "text": text,
        "cell": cell if isinstance(cell, int) and not isinstance(cell, bool) else None,
        "notebook": notebook,
        "run_id": row[0],
        "started_at": row[3],
        "status": row[2],
        "runs": runs,
    }


def _parameters(
    tried: dict[tuple[str, str, Any], list[Any]], rows: Sequence[tuple[Any, ...]]
) -> list[DigestParameter]:
    """One item per (notebook, parameter) from the distinct values each took."""
    grouped: dict[tuple[str, str], list[list[Any]]] = {}
    for (notebook, name, _), seen in tried.items():
        grouped.setdefault((notebook, name), []).append(seen)
    items: list[DigestParameter] = []
    for (notebook, name), values in grouped.items():
        numbers = [seen for seen in values if type(seen[0]) in _NUMBERS and seen[0] == seen[0]]
        numeric = len(numbers) == len(values)
        as_range = numeric and len(values) > _SET_AT_MOST
        # The first run that had the smallest (largest) value.
        low = min(values, key=lambda seen: (seen[0], seen[2])) if numeric else None
        high = min(values, key=lambda seen: (-seen[0], seen[2])) if numeric else None
        recent = sorted(values, key=lambda seen: seen[3], reverse=True)
        listed = [] if as_range else recent[:MAX_VALUES]
        items.append(
            {
                "notebook": notebook,
                "name": name,
                "kind": "range" if as_range else "set",
                "runs": sum(seen[1] for seen in values),
                "distinct": len(values),
                "min": None if low is None else low[0],
                "max": None if high is None else high[0],
                "min_run_id": None if low is None else rows[low[2]][0],
                "max_run_id": None if high is None else rows[high[2]][0],
                "values": [
                    {"value": seen[0], "runs": seen[1], "last_run_id": rows[seen[3]][0]}
                    for seen in listed
                ],
                "more_values": 0 if as_range else max(0, len(recent) - MAX_VALUES),
            }
        )
    return items
