"""What a session's step reads and reports: the code cells and sources of a plan, what a step
did, and how an evaluation failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .._notebook import code_cell_indices
from .._records.redaction import Redactor
from .._records.text import strip_ansi
from .._types import EvaluationFailure
from ..engine import CellFailure
from .ledger import Ran
from .texts import clip

if TYPE_CHECKING:
    from .._run.plan import Plan

__all__ = ["Step", "cell_sources", "cell_text", "code_cells", "evaluation_error"]


@dataclass
class Step:
    """What one step did, gathered as it goes."""

    cells_run: list[int] = field(default_factory=list)
    restored: Literal["checkpoint", "replay"] | None = None
    reason: str | None = None
    failure: CellFailure | None = None


def code_cells(plan: Plan) -> list[Ran]:
    """The code cells a run executes (:func:`~notebook_executor._notebook.code_cell_indices`),
    as they are now."""
    cells = plan.nb.cells
    return [
        Ran(index, cell_text(cells[index].get("source", "")))
        for index in code_cell_indices(plan.nb)
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


def evaluation_error(failure: CellFailure | None, redactor: Redactor) -> EvaluationFailure | None:
    """What ``evaluate`` says of how its code failed (None: it did not), redacted, bounded."""
    if failure is None:
        return None
    return {
        "ename": redactor.text(strip_ansi(failure.ename)),
        "evalue": clip(redactor.text(strip_ansi(failure.evalue)), 2_000, None),
        "traceback": [
            clip(redactor.text(strip_ansi(line)), 2_000, None) for line in failure.traceback[-20:]
        ],
    }
