"""Breadcrumbs: what earlier runs of a notebook found, summarised from the catalog.

:func:`gather` builds a :class:`Digest`'s lists: runs by status, parameter values tried, the
latest successful run's scraps and how each numeric scrap moved, errors grouped by notebook,
kind, cell and name, and the requests and edit notes, newest first. Every item names run ids
that ``get_run`` and ``search`` accept. The markdown page is written by
:mod:`notebook_executor._catalog.digest_text`.

One read of the runs serves every list but the errors: Python groups the runs by notebook,
status, parameters text and scraps text (a few hundred groups for 10,000 runs), so each distinct
text is parsed once, not each run's, and statuses, parameters, trends and the latest scraps are
folded from those groups. That is 1.6x faster than a ``GROUP BY`` query per list (45 against
73 ms at 10,000 runs, same answer): SQLite's grouping sorts text keys in a temporary B-tree,
where a dict of a few hundred keys costs next to nothing. Errors come grouped, with their newest
runs, from one window query over the failed runs (a traceback is never parsed). A run is placed
in time by its *mark*, ``started_at || ' ' || run_id``, which sorts as the catalog's
newest-first order does.
Measured with ``benchmarks/bench_catalog.py`` at 10,000 runs: see docs/benchmarks.md.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .._types import (
    DigestFailure,
    DigestNote,
    DigestParameter,
    DigestScraps,
    DigestStatus,
    DigestTrend,
)

if TYPE_CHECKING:
    import sqlite3

__all__ = ["MAX_ITEMS", "MAX_VALUES", "gather", "nothing"]

#: Most items a list of the digest holds; the others are counted in ``omitted``.
MAX_ITEMS = 50
#: Most values listed for a parameter tried as a set (the most recent ones).
MAX_VALUES = 12
#: A parameter with more distinct numbers than this is shown as a range.
_SET_AT_MOST = 8
#: Every item is bounded: a text (a request, an edit note, a value, a path) keeps at most this
#: many characters, a list or mapping inside an item at most :data:`_ENTRIES` entries, and
#: what is nested deeper than :data:`_DEPTH` is shown as its JSON text, clipped.
ITEM_TEXT_CHARS = 500
_ENTRIES = 20
_DEPTH = 4


_MARK = "started_at || ' ' || run_id"
_ERROR_VALUE_CHARS = 300
_RUN_IDS_PER_ERROR = 5
_SCALARS = frozenset({str, int, float, bool, type(None)})
_NUMBERS = frozenset({int, float})
_ERRORS = f"""
WITH failed AS (
    SELECT notebook, error_kind, json_extract(failed_cell, '$.index') AS cell,
        json_extract(failed_cell, '$.ename') AS ename,
        json_extract(failed_cell, '$.evalue') AS evalue, started_at, run_id
    FROM runs {{where}}
)
SELECT * FROM (
    SELECT notebook, error_kind, cell, ename, evalue, started_at, run_id,
        count(*) OVER grouped, min(started_at) OVER grouped,
        row_number() OVER (grouped ORDER BY started_at DESC, run_id DESC) AS newest
    FROM failed WINDOW grouped AS (PARTITION BY notebook, error_kind, cell, ename)
) WHERE newest <= {_RUN_IDS_PER_ERROR} ORDER BY newest
"""


def gather(conn: sqlite3.Connection, where: str, values: Sequence[Any]) -> dict[str, Any]:
    """The digest's lists (all but ``notebook``, ``since`` and ``text``), and ``runs`` and
    ``omitted``, for the runs ``where`` selects (a clause as ``sql.filters`` builds it)."""
    # One pass over the runs: they are grouped by (notebook, status, parameters text, scraps
    # text), and their requests and edit notes collected. Statuses, parameters, trends and the
    # latest scraps are folded from those few groups.
    found = conn.execute(
        f"SELECT notebook, status, {_MARK}, parameters, scrap_values, request, edit_notes "
        f"FROM runs{where}",
        list(values),
    ).fetchall()
    groups, notes, more_notes = _runs(found)
    errors_where = f"{where} AND status = 'error'" if where else " WHERE status = 'error'"
    errors = conn.execute(_ERRORS.replace("{where}", errors_where), list(values)).fetchall()
    statuses = [
        _status(status, count, first, last)
        for status, count, first, last in sorted(
            _fold(groups, lambda key: (key[1],)), key=lambda item: (-item[1], item[0])
        )
    ]
    lists: dict[str, list[Any]] = {
        "statuses": statuses,
        "parameters": _parameters(_fold(groups, lambda key: (key[0], key[2]))),
        "scraps": _latest(groups),
        "trends": _trends(_fold(groups, lambda key: (key[0], key[3]))),
        "errors": _errors(errors),
    }
    omitted = {
        name: len(items) - MAX_ITEMS for name, items in lists.items() if len(items) > MAX_ITEMS
    }
    if more_notes:
        omitted["notes"] = more_notes
    gathered: dict[str, Any] = {
        name: [_bounded(item) for item in items[:MAX_ITEMS]] for name, items in lists.items()
    }
    gathered["notes"] = [_bounded(item) for item in notes]
    gathered["runs"] = sum(status["count"] for status in statuses)
    gathered["omitted"] = omitted
    return gathered


def _clip(text: str) -> str:
    if len(text) <= ITEM_TEXT_CHARS:
        return text
    return f"{text[:ITEM_TEXT_CHARS]}... ({len(text) - ITEM_TEXT_CHARS:,} more characters)"


def _bounded(value: Any, depth: int = 0) -> Any:
    """``value`` (an item of the digest, or part of one) within the bounds above: a run's
    1 MB edit note, a huge parameter value or scrap, is shown clipped, never whole."""
    if isinstance(value, str):
        return _clip(value)
    if not isinstance(value, (dict, list)):
        return value
    if depth >= _DEPTH:
        return _clip(json.dumps(value, default=str))
    if isinstance(value, dict):
        kept = {
            _clip(str(key)): _bounded(entry, depth + 1)
            for key, entry in list(value.items())[:_ENTRIES]
        }
        if len(value) > _ENTRIES:
            kept["..."] = f"{len(value) - _ENTRIES:,} more entries"
        return kept
    items = [_bounded(entry, depth + 1) for entry in value[:_ENTRIES]]
    if len(value) > _ENTRIES:
        items.append(f"... ({len(value) - _ENTRIES:,} more)")
    return items


def nothing() -> dict[str, Any]:
    """What :func:`gather` finds where there are no runs at all (no runs folder yet)."""
    lists = ("statuses", "parameters", "scraps", "trends", "errors", "notes")
    return {**{name: [] for name in lists}, "runs": 0, "omitted": {}}


def _split(mark: str) -> tuple[str, str]:
    started, _, run_id = mark.partition(" ")
    return started, run_id


def _status(status: str, count: int, first: str, last: str) -> DigestStatus:
    first_at, first_run_id = _split(first)
    last_at, last_run_id = _split(last)
    return {
        "status": status,
        "count": count,
        "first_at": first_at,
        "first_run_id": first_run_id,
        "last_at": last_at,
        "last_run_id": last_run_id,
    }


def _json_array(texts: Sequence[Any]) -> list[dict[str, Any]]:
    # One parse of one JSON array: several times faster than a json.loads per text.
    joined = ",".join(text if isinstance(text, str) and text else "{}" for text in texts)
    parsed = json.loads("[" + joined + "]")
    return [value if isinstance(value, dict) else {} for value in parsed]


#: Runs grouped by (notebook, status, parameters text, scraps text): [runs, first, last mark].
_Groups = dict[tuple[str, str, str, str], list[Any]]


def _fold(
    groups: _Groups, key: Callable[[tuple[str, ...]], tuple[str, ...]]
) -> list[tuple[Any, ...]]:
    """The groups merged by ``key``: one ``(*key, runs, first mark, last mark)`` per value."""
    folded: dict[tuple[str, ...], list[Any]] = {}
    for group, (count, first, last) in groups.items():
        at = key(group)
        seen = folded.get(at)
        if seen is None:
            folded[at] = [count, first, last]
            continue
        seen[0] += count
        if first < seen[1]:
            seen[1] = first
        if last > seen[2]:
            seen[2] = last
    return [(*at, count, first, last) for at, (count, first, last) in folded.items()]


def _is_number(value: Any) -> bool:
    # bool is not a number here; NaN has no place on a range.
    return type(value) in _NUMBERS and value == value


def _parameters(groups: Sequence[tuple[Any, ...]]) -> list[DigestParameter]:
    """One item per (notebook, parameter), from the runs grouped by parameters text."""
    # (notebook, name) -> value's key -> [value, runs, first mark, last mark]
    tried: dict[tuple[str, str], dict[Any, list[Any]]] = {}
    parsed = _json_array([group[1] for group in groups])
    for (notebook, _, count, first, last), params in zip(groups, parsed, strict=True):
        for name, value in params.items():
            # Scalars are their own key, with their type (1, 1.0 and True are three values).
            kind = type(value)
            key = (kind, value) if kind in _SCALARS else json.dumps(value, sort_keys=True)
            seen = tried.setdefault((notebook, name), {}).get(key)
            if seen is None:
                tried[(notebook, name)][key] = [value, count, first, last]
            else:
                seen[1] += count
                seen[2], seen[3] = min(seen[2], first), max(seen[3], last)
    items: list[DigestParameter] = []
    for (notebook, name), found in tried.items():
        values = list(found.values())
        numeric = all(_is_number(seen[0]) for seen in values)
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
                "min_run_id": None if low is None else _split(low[2])[1],
                "max_run_id": None if high is None else _split(high[2])[1],
                "values": [
                    {"value": seen[0], "runs": seen[1], "last_run_id": _split(seen[3])[1]}
                    for seen in listed
                ],
                "more_values": 0 if as_range else max(0, len(recent) - MAX_VALUES),
            }
        )
    return items


def _latest(groups: _Groups) -> list[DigestScraps]:
    """The latest successful run of each notebook, newest first, with its JSON scraps."""
    newest: dict[str, tuple[str, str]] = {}  # notebook -> (last mark, scraps text)
    for (notebook, status, _, text), (_, _, last) in groups.items():
        if status == "success" and (notebook not in newest or last > newest[notebook][0]):
            newest[notebook] = (last, text)
    parsed = _json_array([text for _, text in newest.values()])
    items: list[DigestScraps] = []
    for (notebook, (mark, _)), scraps in zip(newest.items(), parsed, strict=True):
        started, run_id = _split(mark)
        items.append(
            {"notebook": notebook, "run_id": run_id, "started_at": started, "scraps": scraps}
        )
    return sorted(items, key=lambda item: (item["started_at"], item["run_id"]), reverse=True)


def _trends(groups: Sequence[tuple[Any, ...]]) -> list[DigestTrend]:
    """How each numeric scrap moved, from the runs grouped by scraps text."""
    # (notebook, name) -> [runs, (first mark, value), (last mark, value), (value, first mark)
    # of the smallest, of the largest]
    moved: dict[tuple[str, str], list[Any]] = {}
    parsed = _json_array([group[1] for group in groups])
    for (notebook, _, count, first, last), scraps in zip(groups, parsed, strict=True):
        for name, value in scraps.items():
            if not _is_number(value):
                continue
            number = float(value)
            seen = moved.get((notebook, name))
            if seen is None:
                moved[(notebook, name)] = [
                    count,
                    (first, number),
                    (last, number),
                    (number, first),
                    (-number, first),
                ]
                continue
            seen[0] += count
            seen[1] = min(seen[1], (first, number))
            seen[2] = max(seen[2], (last, number))
            seen[3] = min(seen[3], (number, first))
            seen[4] = min(seen[4], (-number, first))
    items: list[DigestTrend] = []
    for (notebook, name), (runs, first, last, low, high) in moved.items():
        items.append(
            {
                "notebook": notebook,
                "name": name,
                "runs": runs,
                "first": first[1],
                "first_run_id": _split(first[0])[1],
                "last": last[1],
                "last_run_id": _split(last[0])[1],
                "min": low[0],
                "min_run_id": _split(low[1])[1],
                "max": -high[0],
                "max_run_id": _split(high[1])[1],
            }
        )
    return items


def _errors(found: Sequence[tuple[Any, ...]]) -> list[DigestFailure]:
    """Failed runs grouped, each group's newest runs first; most frequent groups first."""
    groups: dict[tuple[Any, ...], DigestFailure] = {}
    for notebook, kind, cell, ename, evalue, started, run_id, count, first_at, _ in found:
        group = groups.get((notebook, kind, cell, ename))
        if group is None:  # its newest run (the rows come newest first)
            groups[(notebook, kind, cell, ename)] = {
                "notebook": notebook,
                "error_kind": kind,
                "ename": None if ename is None else str(ename),
                "evalue": None if evalue is None else str(evalue)[:_ERROR_VALUE_CHARS],
                "cell": cell if type(cell) is int else None,
                "count": count,
                "first_at": first_at,
                "last_at": started,
                "last_run_id": run_id,
                "run_ids": [run_id],
            }
        else:
            group["run_ids"].append(run_id)
    # Most frequent first; equal counts, the most recent first.
    return sorted(groups.values(), key=lambda e: (e["count"], e["last_at"]), reverse=True)


def _runs(rows: Sequence[tuple[Any, ...]]) -> tuple[_Groups, list[DigestNote], int]:
    """The runs grouped (see :data:`_Groups`); the newest :data:`MAX_ITEMS` notes (requests and
    edit notes, each text once with its newest run and how many runs had it) and how many more
    there are."""
    groups: _Groups = {}
    # (kind, notebook, cell, text) -> [runs, newest mark, place in its run, status]
    found: dict[tuple[Any, ...], list[Any]] = {}

    def note(key: tuple[Any, ...], mark: str, place: int, status: str) -> None:
        seen = found.get(key)
        if seen is None:
            found[key] = [1, mark, place, status]
            return
        seen[0] += 1
        if mark > seen[1]:
            seen[1:] = [mark, place, status]

    for notebook, status, mark, parameters, scraps, request, edit_notes in rows:
        group = (notebook, status, parameters, scraps)
        seen = groups.get(group)
        if seen is None:
            groups[group] = [1, mark, mark]
        else:
            seen[0] += 1
            if mark < seen[1]:
                seen[1] = mark
            elif mark > seen[2]:
                seen[2] = mark
        if request:
            note(("request", notebook, None, request), mark, 0, status)
        if edit_notes and edit_notes != "[]":
            for place, edit in enumerate(json.loads(edit_notes), start=1):
                text = edit.get("note") or request
                if isinstance(text, str) and text:
                    cell = edit.get("index")
                    key = ("edit", notebook, cell if type(cell) is int else None, text)
                    note(key, mark, place, status)
    # Newest first; within one run its request, then its edits in order.
    newest = heapq.nlargest(MAX_ITEMS, found.items(), key=lambda item: (item[1][1], -item[1][2]))
    notes = [
        _note(kind, text, cell, notebook, mark, runs, status)
        for (kind, notebook, cell, text), (runs, mark, _, status) in newest
    ]
    return groups, notes, max(0, len(found) - MAX_ITEMS)


def _note(
    kind: Literal["request", "edit"], text: str, cell: int | None, notebook: str, mark: str,
    runs: int, status: str,
) -> DigestNote:  # fmt: skip
    started, run_id = _split(mark)
    return {
        "kind": kind,
        "text": text,
        "cell": cell,
        "notebook": notebook,
        "run_id": run_id,
        "started_at": started,
        "status": status,
        "runs": runs,
    }
