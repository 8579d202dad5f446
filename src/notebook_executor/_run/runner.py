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

from .._errors import NotebookExecutorError, OutputWriteError
from ..engine import CellFailure, Engine, EngineOutcome
from . import records as _records
from .plan import Plan
from .results import annotate_cells, build_result
from .scrub import MIN_SECRET_CHARS, redact, scrub_notebook
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
    cancelled run, and is then raised again. When the caller's copy (``output_path``) cannot
    be written, the run files and catalog are still finished, then :class:`OutputWriteError`
    (holding the result) is raised.
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
        "kernel": {"name": plan.job.kernel.name, "language": plan.job.kernel.language},
        "environment": _records.environment_record(),
        "env_names": plan.env_names,
        "secret_names": sorted(plan.secrets),
        # Too short to search for in outputs without damaging them (see _run/scrub.py).
        "secrets_not_searched": sorted(
            name for name, value in plan.secrets.items() if 0 < len(value) < MIN_SECRET_CHARS
        ),
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
    # What is stored: streams coalesced, secrets redacted, outputs holding one withheld; the
    # run files also cap each cell's streams (the caller's copy keeps them whole).
    executed = scrub_notebook(plan.nb, plan.secrets)
    recorded, capped = _records.cap_streams(executed)
    output_cut = dict.fromkeys(capped, "stream_cap")
    output_cut.update(dict.fromkeys(outcome.output_lost, "lost"))
    result = build_result(
        run_id=run_id,
        notebook_path=plan.notebook,
        output_path=os.fspath(output_path),
        parameters=plan.parameters,
        request=plan.request,
        started_at=_records.iso(started),
        finished_at=_records.iso(finished),
        duration_seconds=time.perf_counter() - clock,
        executed=executed,
        outcome=outcome,
        cell_map=plan.cell_map,
        secrets=plan.secrets,
        output_cut=output_cut,
    )
    result = dict(redact(result, plan.secrets))
    stored = {
        **result,
        "notebook": record["notebook"],
        "output_path": record["output_path"],
        **provenance,
    }
    _records.write_run_files(runs_dir, run_id, recorded, stored, final=True)
    copy_failed: OutputWriteError | None = None
    if plan.output_path is not None:
        executed.metadata[_records.RECORD_KEY] = stored
        try:
            write_notebook(executed, plan.output_path)
        except (OSError, NotebookExecutorError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            copy_failed = OutputWriteError(os.fspath(plan.output_path), reason, result)
    on_record("finish", stored)
    if interrupted is not None:
        raise interrupted
    if copy_failed is not None:
        raise copy_failed
    return result


def _cancelled_cell(notebook: NotebookNode, outcome: EngineOutcome) -> int:
    """The code cell that was running when the run was cancelled: the first not completed."""
    done = set(outcome.completed)
    codes = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    return next((i for i in codes if i not in done), codes[-1] if codes else 0)
