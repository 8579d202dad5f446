"""One run on the caller's thread, shown as it goes: a bar of cells, or its outputs as they
arrive (``log_output``), and the caller's own hooks (``on_cell``, ``cancel``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from .._run.plan import Plan
from .._types import RunResult
from .live_output import output_printer
from .progress import cell_hook, cell_progress

__all__ = ["run_in_foreground"]


def run_in_foreground(
    plan: Plan,
    run: Callable[[Plan], RunResult],
    *,
    progress: bool | None,
    log_output: bool,
    on_cell: Callable[[int, int], None] | None,
    cancel: threading.Event | None,
) -> RunResult:
    """``run(plan)``, with a bar of cells (``progress``; None: on a terminal, and not with
    ``log_output``), outputs written to stderr as they arrive (``log_output``), and the
    caller's ``on_cell(done, total)`` and ``cancel``."""
    cells = sum(1 for cell in plan.nb.cells if cell.cell_type == "code")
    plan.job.cancel = cancel
    printer = None
    if log_output:
        printer = plan.job.on_output = output_printer(plan.secrets)
        progress = progress or False  # a bar between outputs helps nobody
    with cell_progress(cells, Path(plan.notebook).name, progress) as bar:
        plan.job.on_cell = cell_hook(bar, on_cell, cells)
        try:
            return run(plan)
        finally:
            if printer is not None:
                printer.flush()
