"""What a session's step reads and reports: the code cells and sources of a plan, and how a
cell failed, as ``execute`` reports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .._kernels.kernel_engine import cell_error, clean_exit, skipped
from .._notebook import new_code_cell
from .._records.redaction import Redactor
from .._records.text import strip_ansi
from .._types import EvaluationFailure
from ..engine import CellFailure
from .ledger import Ran
from .texts import clip

if TYPE_CHECKING:
    from .._kernels.cells import CellEnd
    from .._notebook import NotebookNode
    from .._run.plan import Plan

__all__ = [
    "Step",
    "cell_failure",
    "cell_sources",
    "cell_text",
    "code_cells",
    "evaluation_error",
    "timed_out",
]


@dataclass
class Step:
    """What one step did, gathered as it goes."""

    cells_run: list[int] = field(default_factory=list)
    restored: Literal["checkpoint", "replay"] | None = None
    reason: str | None = None
    failure: CellFailure | None = None


def code_cells(plan: Plan) -> list[Ran]:
    """The code cells a run executes (not those tagged ``skip-execution``), as they are now."""
    return [
        Ran(index, cell_text(cell.get("source", "")))
        for index, cell in enumerate(plan.nb.cells)
        if cell.cell_type == "code" and not skipped(cell)
    ]


def cell_sources(plan: Plan) -> dict[int, str]:
    """Source index -> source text of every cell (the injected cell left out)."""
    return {
        plan.cell_map.to_source(index): cell_text(cell.get("source", ""))
        for index, cell in enumerate(plan.nb.cells)
        if not plan.cell_map.is_injected(index)
    }


def cell_text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def timed_out() -> CellEnd:
    from .._kernels.cells import CellEnd

    return CellEnd("timeout")


def cell_failure(
    index: int,
    cell: NotebookNode,
    end: CellEnd,
    cell_timeout: float | None,
    timeout: float | None,
    limit: float | None,
) -> CellFailure | None:
    """How cell ``index`` failed, as ``execute`` reports it, or None when it completed."""
    if end.how == "ok":
        return None
    if end.how == "error":
        return None if clean_exit(cell) else cell_error(index, cell, end.reply)
    if end.how == "timeout":
        if cell_timeout is not None and (limit is None or limit >= cell_timeout):
            message = f"the cell exceeded its cell_timeout of {cell_timeout:g} s"
        else:
            message = f"the step exceeded its timeout of {timeout:g} s while this cell was running"
        return CellFailure(index, "timeout", "TimeoutError", message, [])
    return CellFailure(
        index, "kernel_died", "DeadKernelError", "the kernel died while this cell was running", []
    )


def evaluation_error(
    outputs: list[Any], end: CellEnd, redactor: Redactor
) -> EvaluationFailure | None:
    cell = new_code_cell("")
    cell.outputs = outputs
    failure = cell_failure(0, cell, end, None, None, None)
    if failure is None:
        return None
    return {
        "ename": redactor.text(strip_ansi(failure.ename)),
        "evalue": clip(redactor.text(strip_ansi(failure.evalue)), 2_000, "the session's run"),
        "traceback": [
            clip(redactor.text(strip_ansi(line)), 2_000, "the session's run")
            for line in failure.traceback[-20:]
        ],
    }
