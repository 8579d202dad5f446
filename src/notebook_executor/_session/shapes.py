"""The shapes a session answers with: a step's result and an evaluation's."""

from __future__ import annotations

from typing import Literal, TypedDict

from .._types import RunResult

__all__ = ["CellText", "EvaluationError", "EvaluationResult", "StepResult"]


class CellText(TypedDict):
    """What one cell showed, as bounded ANSI-free text; images as ``run://`` references."""

    index: int
    text: str


class StepResult(RunResult):
    """What :meth:`Session.run <notebook_executor.Session.run>` and
    :meth:`~notebook_executor.Session.rerun_from` return: the result dict of the session so
    far (``status`` and ``failed_cell`` as of this step; ``status`` is never ``"running"`` and
    ``edited_cells`` is empty: a session runs the source as it is, the edits it saw are in its
    record's log), and what the step did."""

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
