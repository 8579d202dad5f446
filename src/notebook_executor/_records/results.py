"""Building the result dict (docs/reference/results.md) from an executed notebook and the engine's
outcome.

Indices: the engine works on the job notebook, which holds one injected-parameters cell the
source does not have. :class:`CellMap` translates back, so ``failed_cell.index`` is a position in
``read_notebook(source).cells``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._types import FailedCell, RunResult
from ..engine import EngineOutcome
from .scraps import find_scraps, summarize_scrap
from .scrub import Redactor, redact
from .text import strip_ansi

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = [
    "EDIT_KEYS",
    "RESULT_KEYS",
    "CellMap",
    "annotate_cells",
    "build_result",
    "modified_mark",
    "redact",
    "skip_tagged",
]

#: Keys of the result dict, in order (docs/reference/results.md): those of :class:`RunResult`.
RESULT_KEYS = tuple(RunResult.__annotations__)

#: The keys of a code cell's run metadata that a modified run's edited cell keeps: the
#: template's text (after substitution) and the note saying why it was changed.
EDIT_KEYS = ("original_source", "edit_note")


def modified_mark(result: Mapping[str, Any]) -> str:
    """`` [modified: cells 2, 4]`` for a modified run (docs/how-to/modified-runs.md: cells
    replaced for that run only; a result's or a catalog row's ``edited_cells``), ``
    [resumed from RUN]`` and `` [reused: cells 0-5 from RUN]`` for a run that took cells from
    another (docs/how-to/incremental.md), else nothing: how the command line's summaries and
    the report's tables mark it."""
    edited = result.get("edited_cells") or []
    mark = ""
    if edited:
        mark = f" [modified: cell{'s' if len(edited) > 1 else ''} {', '.join(map(str, edited))}]"
    # docs/how-to/incremental.md: cells whose state and outputs came from an earlier run.
    if result.get("resumed_from"):
        mark += f" [resumed from {result['resumed_from']}]"
    reused = result.get("reused_cells") or []
    if reused:
        cells = f"cell {reused[0]}" if len(reused) == 1 else f"cells {reused[0]}-{reused[-1]}"
        mark += f" [reused: {cells} from {result.get('reused_from')}]"
    return mark


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

    def to_job(self, source_index: int) -> int:
        """Job index of the source cell at ``source_index`` (the inverse of
        :meth:`to_source` but for the injected cell)."""
        if self.injected_at is None or source_index < self.injected_at:
            return source_index
        return source_index + 1


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
        # A modified run's edited cell keeps the template's text and the note beside it.
        before = cell.metadata.get("notebook_executor")
        if isinstance(before, dict):
            info.update((key, before[key]) for key in EDIT_KEYS if key in before)
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
    secrets: Mapping[str, str] | None = None,
    output_cut: Mapping[int, str] | None = None,
    edited_cells: Iterable[int] = (),
    front_matter: bool = False,
    resumed_from: str | None = None,
) -> RunResult:
    """Assemble the result dict for one run.

    ``front_matter``: the source is a logbook whose first cell is its front matter made a
    parameters cell, no code cell of the source (not counted in ``cells_total``).

    The failed cell's texts are redacted of ``secrets`` and then clipped (:data:`ERROR_LIMITS`),
    so the result stays small whatever the notebook raises and a clip never leaves part of a
    secret. ``output_cut`` maps job cell indices whose outputs the run records do not hold whole
    to why (``"stream_cap"`` or ``"lost"``).
    """
    redactor = Redactor(secrets or {})
    # A logbook's first cell is its front matter made a parameters cell: no code cell of the
    # source (the summary said "2/2 code cells" of a logbook with one).
    front = front_matter
    code_cells = [
        i
        for i, cell in enumerate(executed.cells)
        if cell.cell_type == "code"
        and not cell_map.is_injected(i)
        and not (front and cell_map.to_source(i) == 0)
    ]
    completed = set(outcome.completed)
    failure = outcome.failure
    failed_cell: FailedCell | None = None
    if failure is not None:
        source_index = cell_map.to_source(failure.index)
        failed_cell = {
            "index": source_index,
            "source": _clip(redactor.text(_cell_source(executed, failure.index)), "source"),
            "ename": _clip(redactor.text(strip_ansi(failure.ename)), "ename"),
            "evalue": _clip(redactor.text(strip_ansi(failure.evalue)), "evalue"),
            "traceback": _clip_lines(
                [redactor.text(strip_ansi(line)) for line in failure.traceback]
            ),
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
        "output_cut": [
            {"index": cell_map.to_source(index), "reason": reason}
            for index, reason in sorted((output_cut or {}).items())
        ],
        "edited_cells": sorted(edited_cells),
        "reused_cells": [
            cell_map.to_source(i)
            for i in outcome.reused
            if not cell_map.is_injected(i) and not (front and cell_map.to_source(i) == 0)
        ],
        "reused_from": outcome.reused_from,
        "resumed_from": resumed_from,
        "state_notes": [redactor.text(note) for note in outcome.state_notes],
    }


#: Longest text (in JSON characters, as ``json.dumps`` writes it) kept in the result dict for
#: each part of ``failed_cell``: the run records keep them whole. Together they stay well under
#: 20,000 characters whatever the notebook raises.
ERROR_LIMITS = {"ename": 200, "evalue": 4_000, "source": 4_000, "traceback": 6_000}
#: Longest single traceback line kept (the last line usually repeats ``ename: evalue``).
MAX_TRACEBACK_LINE = 2_000
MAX_ERROR_CHARS = ERROR_LIMITS["evalue"]


def _encoded(text: str) -> int:
    return len(json.dumps(text)) - 2


def _clip(text: str, part: str, limit: int | None = None) -> str:
    """``text`` cut to ``limit`` JSON characters (default: that of ``part``), with a marker."""
    limit = ERROR_LIMITS[part] if limit is None else limit
    if len(text) <= limit // 12 or _encoded(text) <= limit:
        return text
    room = max(0, limit - 60)
    low, high = 0, min(len(text), room)
    while low < high:  # the longest prefix that fits once encoded
        middle = (low + high + 1) // 2
        if _encoded(text[:middle]) <= room:
            low = middle
        else:
            high = middle - 1
    return text[:low] + f"... [{len(text) - low} more characters in the run records]"


def _clip_lines(lines: list[str]) -> list[str]:
    clipped: list[str] = []
    budget = ERROR_LIMITS["traceback"]
    for line in reversed(lines):  # the end of a traceback says the most
        line = _clip(line, "traceback", min(MAX_TRACEBACK_LINE, budget))
        cost = _encoded(line) + 4  # quotes and separator
        if cost > budget or budget < 100:
            clipped.append("[earlier traceback lines are in the run records]")
            break
        clipped.append(line)
        budget -= cost
    return clipped[::-1]


def _cell_source(nb: NotebookNode, index: int) -> str:
    if 0 <= index < len(nb.cells):
        return str(nb.cells[index].source)
    return ""
