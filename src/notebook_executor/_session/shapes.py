"""The shapes a session answers with: a step's result and an evaluation's."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = ["CellText", "EvaluationError", "EvaluationResult", "FailedCell", "StepResult"]


class FailedCell(TypedDict):
    """The cell a run or step stopped at (section 4's ``failed_cell``)."""

    index: int
    source: str
    ename: str
    evalue: str
    traceback: list[str]


class CellText(TypedDict):
    """What one cell showed, as bounded ANSI-free text; images as ``run://`` references."""

    index: int
    text: str


class StepResult(TypedDict):
    """What :meth:`Session.run <notebook_executor.Session.run>` and
    :meth:`~notebook_executor.Session.rerun_from` return: the result dict of the session so
    far (``status`` and ``failed_cell`` as of this step), and what the step did."""

    run_id: str
    status: Literal["success", "error"]
    error_kind: str | None
    notebook: str
    output_path: str
    parameters: dict[str, Any]
    request: str | None
    started_at: str
    finished_at: str
    duration_seconds: float
    cells_total: int
    cells_executed: int
    failed_cell: FailedCell | None
    scraps: dict[str, Any]
    output_cut: list[dict[str, Any]]
    #: Empty: a session runs the source as it is; the edits it saw are in its record's log.
    edited_cells: list[int]
    session_id: str
    #: Source indices this step ran, replayed cells included, in order.
    cells_run: list[int]
    outputs: list[CellText]
    #: Source indices of cells whose source changed after they ran.
    stale_cells: list[int]
    restored: Literal["checkpoint", "replay"] | None
    restore_reason: str | None


class EvaluationError(TypedDict):
    """The exception an evaluation raised."""

    ename: str
    evalue: str
    traceback: list[str]


class EvaluationResult(TypedDict):
    """What :meth:`Session.evaluate <notebook_executor.Session.evaluate>` returns."""

    status: Literal["ok", "error"]
    output: str
    error: EvaluationError | None
