"""Catalog rows: a run record made a row, a row made a result dict, rows made a scraps frame.

A row holds the result dict's keys (``parameters``, ``scraps`` and ``failed_cell`` as JSON
text), the run's provenance (source path and sha256, uuid, kernel, host, pid), and two derived
columns the queries need: ``notebook_name``, ``scrap_values`` (the JSON scraps alone) and
``edit_notes`` (the index and note of each edit of a modified run). Times
are stored canonical (``YYYY-MM-DDTHH:MM:SS.fffZ``), so they sort as text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import timezone
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from .._records.results import RESULT_KEYS
from .._records.scraps import JSON_ENCODERS
from .._times import iso, parse_time
from .._types import RunResult

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "STATUSES",
    "canonical_time",
    "going",
    "mark_interrupted",
    "open_session",
    "result",
    "row_from_record",
    "scrap_frame",
]

STATUSES = ("success", "error", "running")

_JSON_KEYS = frozenset(
    {"parameters", "scraps", "failed_cell", "output_cut", "edited_cells", "reused_cells"}
    | {"state_notes"}
)


def row_from_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The catalog row of a run record (the dict stored in the run notebook's metadata)."""
    run_id = record.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError("the record has no run_id")
    source = _mapping(record.get("source"))
    kernel = _mapping(record.get("kernel"))
    scraps = _mapping(record.get("scraps"))
    notebook = str(record.get("notebook") or source.get("path") or "")
    status = record.get("status")
    failed = record.get("failed_cell")
    return {
        "run_id": run_id,
        "status": status if status in STATUSES else "error",
        "error_kind": _text(record.get("error_kind")),
        "notebook": notebook,
        "output_path": _text(record.get("output_path")),
        "parameters": _dumps(_mapping(record.get("parameters"))),
        "request": _text(record.get("request")),
        "started_at": canonical_time(record.get("started_at")) or "",
        "finished_at": canonical_time(record.get("finished_at")),
        "duration_seconds": _number(record.get("duration_seconds"), float),
        "cells_total": _number(record.get("cells_total"), int),
        "cells_executed": _number(record.get("cells_executed"), int),
        "failed_cell": None if failed is None else _dumps(failed),
        "scraps": _dumps(scraps),
        "output_cut": _dumps(
            record.get("output_cut") if isinstance(record.get("output_cut"), list) else []
        ),
        "notebook_name": PurePosixPath(notebook).name,
        "scrap_values": _dumps({k: v for k, v in scraps.items() if not _is_summary(v)}),
        "edited_cells": _dumps(_edited_cells(record.get("edited_cells"))),
        "edit_notes": _dumps(_edit_notes(record.get("edits"))),
        "reused_cells": _dumps(_edited_cells(record.get("reused_cells"))),
        "reused_from": _text(record.get("reused_from")),
        "resumed_from": _text(record.get("resumed_from")),
        "state_notes": _dumps(
            [str(n) for n in record.get("state_notes") or [] if isinstance(n, str)][:20]
        ),
        "source_path": _text(source.get("path")),
        "source_sha256": _text(source.get("sha256")),
        "uuid": _text(record.get("uuid")),
        "kernel": _text(kernel.get("name")),
        "host": _text(record.get("host")),
        "pid": _number(record.get("pid"), int),
    }


def result(row: Mapping[str, Any]) -> RunResult:
    """The result dict (docs/reference/results.md) of a catalog row."""
    return {  # type: ignore[return-value]  # the keys are RunResult's (RESULT_KEYS)
        key: (None if row[key] is None else json.loads(row[key])) if key in _JSON_KEYS else row[key]
        for key in RESULT_KEYS
    }


def open_session(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is the record of a session not yet closed (its process holds the
    run's liveness lock until it closes, as a run's does until it ends)."""
    session = record.get("session")
    return isinstance(session, Mapping) and session.get("open") is True


def going(record: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Whether a run's record says it is still going: a ``running`` run, an open session."""
    return row["status"] == "running" or open_session(record)


def mark_interrupted(row: dict[str, Any]) -> None:
    """Make a row whose run's process is gone (a ``running`` run, an open session) an
    interrupted error, in place."""
    row["status"] = "error"
    row["error_kind"] = "interrupted"


def scrap_frame(rows: Sequence[tuple[Any, ...]]) -> pd.DataFrame:
    """The scraps() frame, built column-wise: one pass, one list per column.

    ``rows`` are ``(run_id, notebook, status, started_at, duration_seconds, parameters,
    scrap_values)`` tuples, the last two JSON text.
    """
    import pandas as pd

    count = len(rows)
    ids, notebooks, statuses, starts, durations, parameters, scraps = (
        [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(7)]
    )
    columns: dict[str, list[Any]] = {
        "notebook": notebooks,
        "status": statuses,
        "started_at": starts,
        "duration_seconds": durations,
    }
    for prefix, texts in (("parameters.", parameters), ("scraps.", scraps)):
        found: dict[str, list[Any]] = {}
        # One parse of one JSON array is several times faster than a json.loads per row.
        for index, mapping in enumerate(json.loads("[" + ",".join(texts) + "]")):
            for name, value in mapping.items():
                column = found.get(name)
                if column is None:
                    column = found[name] = [None] * count
                column[index] = value
        columns.update((prefix + name, column) for name, column in found.items())
    frame: pd.DataFrame = pd.DataFrame(columns, index=pd.Index(ids, name="run_id", dtype=object))
    return frame


# -- times ---------------------------------------------------------------------------------------


def canonical_time(value: Any) -> str | None:
    """``value`` as the catalog's sortable ``YYYY-MM-DDTHH:MM:SS.fffZ`` (as is if unparsable)."""
    if not isinstance(value, str):
        return None
    parsed = parse_time(value)
    if parsed is None:
        return value
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return iso(parsed.astimezone(timezone.utc))


# -- values --------------------------------------------------------------------------------------


def _is_summary(value: Any) -> bool:
    # How the result dict shows a scrap that is not JSON (see _scraps.summarize_scrap).
    return (
        isinstance(value, dict)
        and isinstance(value.get("encoder"), str)
        and value["encoder"] not in JSON_ENCODERS
    )


def _edited_cells(value: Any) -> list[int]:
    if not isinstance(value, list):
        return []
    return sorted({i for i in value if isinstance(i, int) and not isinstance(i, bool)})


def _edit_notes(value: Any) -> list[dict[str, Any]]:
    """``{"index", "note"}`` of each edit a record lists (the edited text is in the cells)."""
    if not isinstance(value, list):
        return []
    return [
        {"index": edit.get("index"), "note": _text(edit.get("note"))}
        for edit in value
        if isinstance(edit, Mapping)
    ]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _number(value: Any, kind: type[int] | type[float]) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    # A damaged record may hold any JSON number: what SQLite cannot store is unknown.
    try:
        number = kind(value)
    except (OverflowError, ValueError):
        return None
    if kind is int and not -(2**63) <= number < 2**63:
        return None
    return number


def _dumps(value: Any) -> str:
    # Sorted like nbformat writes the run records, so a row reads the same after a reindex.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
