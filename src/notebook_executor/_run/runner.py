"""Running a plan: the engine executes it, the results are built and the run files written.

Data flows one way here: the plan's job goes to the engine, the engine's outcome becomes the
result dict, and the result and executed notebook become the run record.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import CellFailure, Engine, EngineOutcome
from . import records as _records
from .plan import Plan
from .results import annotate_cells, build_result, redact
from .sources import write_notebook

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = ["run_plan"]


def run_plan(
    plan: Plan,
    engine: Engine,
    runs_dir: Path,
    on_record: Callable[[str, Mapping[str, Any]], None],
) -> dict[str, Any]:
    """Run ``plan`` on ``engine``, write its run files under ``runs_dir``, return its result.

    ``on_record("begin" | "finish", record)`` is told of the record as the run starts and
    ends (the executor indexes it in the catalog). A Ctrl-C still finishes the run files, as a
    cancelled run, and is then raised again.
    """
    started = _records.now_utc()
    clock = time.perf_counter()
    run_id = _records.new_run_id(plan.loaded_path, started)
    run_path = _records.run_notebook_path(runs_dir, run_id)
    output_path = plan.output_path or run_path
    provenance = {
        "record_version": _records.RECORD_VERSION,
        "uuid": str(uuid.uuid4()),
        "source": {
            "path": _records.display_path(plan.loaded_path),
            "sha256": plan.sha256,
            "format": plan.source_format,
        },
        "kernel": {
            "name": plan.job.kernel.name,
            "language": plan.job.kernel.language,
            "interpreter": _records.program_path(plan.job.kernel.interpreter),
        },
        "environment": _records.environment_record(),
        "env_names": plan.env_names,
        "secret_names": sorted(plan.secrets),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    record: dict[str, Any] = {
        "run_id": run_id,
        "status": "running",
        "error_kind": None,
        "notebook": _records.display_path(plan.notebook),
        "output_path": _records.display_path(output_path),
        "parameters": redact(plan.parameters, plan.secrets),
        "request": redact(plan.request, plan.secrets),
        "started_at": _records.iso(started),
        **provenance,
    }
    # The injected parameters may hold a secret's value too: the first write is redacted.
    started_notebook = redact(plan.nb, plan.secrets)
    _records.write_run_files(runs_dir, run_id, started_notebook, record, final=False)
    on_record("begin", record)
    interrupted: BaseException | None = None
    try:
        outcome = engine.run(plan.job)
    except KeyboardInterrupt as exc:
        interrupted = exc
        partial = getattr(exc, "outcome", None)
        outcome = partial if isinstance(partial, EngineOutcome) else EngineOutcome()
        if outcome.failure is None:
            outcome.failure = CellFailure(
                _cancelled_cell(plan.nb, outcome),
                "cancelled",
                "KeyboardInterrupt",
                "the run was cancelled",
                [],
            )
    finished = _records.now_utc()
    annotate_cells(plan.nb, outcome)
    result = build_result(
        run_id=run_id,
        notebook_path=plan.notebook,
        output_path=os.fspath(output_path),
        parameters=plan.parameters,
        request=plan.request,
        started_at=_records.iso(started),
        finished_at=_records.iso(finished),
        duration_seconds=time.perf_counter() - clock,
        executed=plan.nb,
        outcome=outcome,
        cell_map=plan.cell_map,
    )
    result = dict(redact(result, plan.secrets))
    executed = redact(plan.nb, plan.secrets)
    stored = {
        **result,
        "notebook": record["notebook"],
        "output_path": record["output_path"],
        **provenance,
    }
    _records.write_run_files(runs_dir, run_id, executed, stored, final=True)
    if plan.output_path is not None:
        write_notebook(executed, plan.output_path)
    on_record("finish", stored)
    if interrupted is not None:
        raise interrupted
    return result


def _cancelled_cell(notebook: NotebookNode, outcome: EngineOutcome) -> int:
    """The code cell that was running when the run was cancelled: the first not completed."""
    done = set(outcome.completed)
    codes = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    return next((i for i in codes if i not in done), codes[-1] if codes else 0)
