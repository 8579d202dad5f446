"""One run on the caller's thread, shown as it goes: a bar of cells, or its outputs as they
arrive (``log_output``), and the caller's own hooks (``on_cell``, ``cancel``; a job's cancel
event also hears of the cell that starts and of outputs: :func:`.jobs.watch`). Each of them
observes the run's cells through the job's hooks (:class:`~notebook_executor.engine.CellHooks`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from .._notebook import code_cell_indices
from .._run.plan import Plan
from .._types import RunResult
from .jobs import watch
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
    caller's ``on_cell(done, total)`` (``total``: the code cells the run executes) and
    ``cancel``."""
    cells = len(code_cell_indices(plan.nb))
    plan.job.cancel = cancel
    hooks = plan.job.hooks
    printer = None
    if log_output:
        printer = shown = output_printer(plan.secrets)
        hooks.on_output.append(lambda event: shown(event.index, event.output))
        progress = progress or False  # a bar between outputs helps nobody
    watch(plan, cancel)  # a job's cancel event hears of its cells and outputs
    with cell_progress(cells, Path(plan.notebook).name, progress) as bar:
        counter = cell_hook(bar, on_cell, cells)
        if counter is not None:
            hooks.on_cell_executed.append(counter)
        try:
            return run(plan)
        finally:
            if printer is not None:
                printer.flush()
