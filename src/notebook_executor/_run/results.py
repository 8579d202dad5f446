"""Building the result dict (SPEC section 4) from an executed notebook and the engine's outcome.

Indices: the engine works on the job notebook, which holds one injected-parameters cell the
source does not have. :class:`CellMap` translates back, so ``failed_cell.index`` is a position in
``read_notebook(source).cells``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine import EngineOutcome
from .scraps import find_scraps, summarize_scrap
from .text import strip_ansi

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = ["CellMap", "annotate_cells", "build_result", "redact", "skip_tagged"]


@dataclass(frozen=True)
class CellMap:
    """Where the injected-parameters cell sits in the job notebook (None when none)."""

    injected_at: int | None

    def to_source(self, job_index: int) -> int:
        """Source index of the job cell at ``job_index``."""
        if self.injected_at is None or job_index < self.injected_at:
            return job_index
        # Cells after the injected one shift back by one; the injected cell itself is
        # reported as the parameters cell it follows.
        return max(job_index - 1, 0)

    def is_injected(self, job_index: int) -> bool:
        """Whether ``job_index`` is the injected cell."""
        return job_index == self.injected_at


def annotate_cells(nb: NotebookNode, outcome: EngineOutcome) -> None:
    """Record in each code cell's metadata whether it ran, failed, was skipped (tagged
    ``skip-execution``) or never ran; the cell that ended the run with ``sys.exit()`` also
    says so."""
    completed = set(outcome.completed)
    failed = outcome.failure.index if outcome.failure else None
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if index in completed:
            status = "completed"
        elif index == failed:
            status = "failed"
        elif skip_tagged(cell):
            status = "skipped"
        else:
            status = "not_run"
        info: dict[str, Any] = {"status": status}
        if index == outcome.exited:
            info["exited"] = True
        if index in outcome.cell_started:
            info["started_at"] = outcome.cell_started[index]
        if index in outcome.cell_seconds:
            info["duration_seconds"] = outcome.cell_seconds[index]
        cell.metadata["notebook_executor"] = info


def skip_tagged(cell: NotebookNode) -> bool:
    """Whether ``cell`` is tagged ``skip-execution`` (nbclient's and nbmake's convention)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return isinstance(tags, list) and "skip-execution" in tags


def build_result(
    *,
    run_id: str,
    notebook_path: str,
    output_path: str,
    parameters: Mapping[str, Any],
    request: str | None,
    started_at: str,
    finished_at: str,
    duration_seconds: float,
    executed: NotebookNode,
    outcome: EngineOutcome,
    cell_map: CellMap,
) -> dict[str, Any]:
    """Assemble the result dict for one run."""
    code_cells = [
        i
        for i, cell in enumerate(executed.cells)
        if cell.cell_type == "code" and not cell_map.is_injected(i)
    ]
    completed = set(outcome.completed)
    failure = outcome.failure
    failed_cell = None
    if failure is not None:
        source_index = cell_map.to_source(failure.index)
        failed_cell = {
            "index": source_index,
            "source": _cell_source(executed, failure.index),
            "ename": _clip(strip_ansi(failure.ename)),
            "evalue": _clip(strip_ansi(failure.evalue)),
            "traceback": _clip_lines([strip_ansi(line) for line in failure.traceback]),
        }
    scraps = {name: summarize_scrap(raw) for name, raw in find_scraps(executed.cells).items()}
    return {
        "run_id": run_id,
        "status": "success" if failure is None else "error",
        "error_kind": None if failure is None else failure.kind,
        "notebook": notebook_path,
        "output_path": output_path,
        "parameters": dict(parameters),
        "request": request,
        "started_at": started_at,
        "finished_at": finished_at,
        "duration_seconds": round(duration_seconds, 6),
        "cells_total": len(code_cells),
        "cells_executed": sum(1 for i in code_cells if i in completed),
        "failed_cell": failed_cell,
        "scraps": scraps,
    }


#: The result dict stays small: long error texts are cut (the run files keep them whole).
MAX_ERROR_CHARS = 10_000


def _clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters in the run files]"


def _clip_lines(lines: list[str]) -> list[str]:
    clipped: list[str] = []
    budget = MAX_ERROR_CHARS * 3
    for line in reversed(lines):  # the end of a traceback says the most
        line = _clip(line)
        if len(line) > budget:
            clipped.append("[earlier traceback lines are in the run files]")
            break
        clipped.append(line)
        budget -= len(line)
    return clipped[::-1]


def _cell_source(nb: NotebookNode, index: int) -> str:
    if 0 <= index < len(nb.cells):
        return str(nb.cells[index].source)
    return ""


def redact(value: Any, secrets: Mapping[str, str]) -> Any:
    """Return ``value`` with every secret value replaced by ``[secret NAME]``, recursively.

    A value is also found as a notebook commonly prints it: in a repr or in JSON.
    """
    pairs = sorted(
        {(name, form) for name, text in secrets.items() if text for form in _printed(text)},
        key=lambda pair: -len(pair[1]),
    )
    if not pairs:
        return value
    return _redact(value, pairs)


def _printed(text: str) -> set[str]:
    """``text`` plain, and as the inside of a repr (either quoting) and of a JSON string."""
    import json

    both = "'\""  # a repr of a text holding both quotes escapes its single quotes
    return {
        text,
        repr(text)[1:-1],
        repr(text + both)[1:-4],
        ascii(text)[1:-1],
        ascii(text + both)[1:-4],
        json.dumps(text, ensure_ascii=False)[1:-1],
        json.dumps(text)[1:-1],
    }


def _redact(value: Any, pairs: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for name, text in pairs:
            if text in value:
                value = value.replace(text, f"[secret {name}]")
        return value
    if isinstance(value, list):
        return [_redact(item, pairs) for item in value]
    if isinstance(value, tuple):
        return tuple(_redact(item, pairs) for item in value)
    if isinstance(value, dict):
        redacted = type(value)() if type(value) is not dict else {}
        for key, item in value.items():
            redacted[_redact(key, pairs) if isinstance(key, str) else key] = _redact(item, pairs)
        return redacted
    return value
