"""Running a plan: the engine executes it, the results are built and the run records written.

Data flows one way here: the plan's job goes to the engine, the engine's outcome becomes the
result dict, and the result and executed notebook become the run record.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._checkpoints.keeper import Keeper, Policy
from .._errors import NotebookExecutorError, OutputWriteError, RecordWriteError, RunsDirError
from .._notebook import code_cell_indices
from .._records.files import file_records
from .._records.identity import notebook_identity
from .._records.ids import new_run_id
from .._records.papermill_meta import annotate_papermill
from .._records.provenance import (
    RECORD_VERSION,
    GitState,
    display_path,
    environment_record,
    lock_sha256,
    machine_record,
    program_path,
    without_home,
)
from .._records.redaction import secret_byte_forms
from .._records.results import annotate_cells, build_result
from .._records.run_markdown import RECORD_KEY
from .._records.scrub import MIN_SECRET_CHARS, redact, scrub_notebook
from .._records.store import RunStore
from .._records.streams import cap_streams, drop_outputs
from .._sources.formats import write_notebook
from .._sources.remote import is_url
from .._times import iso, now_utc
from .._types import RunResult
from ..engine import CellFailure, CellStart, Engine, EngineOutcome
from .cell_loop import run_job
from .edits import edit_notes
from .plan import Plan

if TYPE_CHECKING:
    from .._notebook import NotebookNode

logger = logging.getLogger(__name__)

__all__ = [
    "OnRecord",
    "RunStart",
    "begin_run",
    "finish_run",
    "first_unfinished_cell",
    "prepared_notebook",
    "run_plan",
]


#: ``on_record(event, record, cells)``: told of a run's record as it is written, ``event``
#: ``"begin"`` or ``"finish"``; with ``"finish"``, ``cells`` are the cells the run file holds
#: as written (redacted, streams capped), so that the catalog indexes them without reading the
#: file back; None: only the record is given. ``"at_cell"`` (``{"run_id", "cell"}``, no file
#: written) as each code cell starts: :func:`cell_teller`. (``Callable[..., None]``: a
#: session's recorder passes on the executor's ``_catalog_call``, typed with two arguments.)
OnRecord = Callable[..., None]


@dataclass
class RunStart:
    """A run whose record has been begun: its id, start time and the record written so far."""

    run_id: str
    started: datetime
    output_path: str
    record: dict[str, Any]
    provenance: dict[str, Any]
    #: The notebook's repository (docs/how-to/reproduce.md), its ``git status`` still running.
    git: GitState | None = None


def run_plan(
    plan: Plan,
    engine: Engine,
    runs_dir: Path,
    on_record: OnRecord,
) -> RunResult:
    """Run ``plan`` on ``engine``, write its run records under ``runs_dir``, return its result.

    ``on_record("begin" | "finish", record[, cells])`` is told of the record as the run
    starts and ends (the executor indexes it in the catalog: :data:`OnRecord`). A Ctrl-C
    still finishes the run records, as a cancelled run, and is then raised again, holding the
    cancelled run's result dict as its ``result`` attribute. Any other exception from the
    engine (a bug or an unexpected failure of its machinery) does not escape: the run is
    finished as failed, with a ``kernel_died`` failure naming the exception's type and its
    (redacted) message on the first unfinished code cell, and that error result is returned,
    so no record is left ``running``. When the caller's copy (``output_path``) cannot be
    written, the run records and
    catalog are still finished, then :class:`OutputWriteError` (holding the result) is raised.
    """
    clock = time.perf_counter()
    start = begin_run(plan, runs_dir, on_record)
    interrupted: BaseException | None = None
    keeper = state_keeper(plan, runs_dir, start.run_id, start.record["source"]["path"])
    plan.job.state = keeper
    try:
        outcome = run_job(engine, plan.job)
    except KeyboardInterrupt as exc:
        interrupted = exc
        partial = getattr(exc, "outcome", None)
        outcome = partial if isinstance(partial, EngineOutcome) else EngineOutcome()
        if outcome.failure is None:
            outcome.failure = CellFailure(
                first_unfinished_cell(plan.nb, outcome.completed),
                "cancelled",
                "KeyboardInterrupt",
                "the run was cancelled",
                [],
            )
    except Exception as exc:  # the engine itself failed: the run still ends, as failed
        logger.warning("%s: the engine failed: %s", plan.notebook, type(exc).__name__)
        partial = getattr(exc, "outcome", None)
        outcome = partial if isinstance(partial, EngineOutcome) else EngineOutcome()
        outcome.failure = CellFailure(
            first_unfinished_cell(plan.nb, outcome.completed),
            "kernel_died",
            type(exc).__name__,
            redact(str(exc), plan.secrets),
            [],
        )
    finally:
        plan.job.state = None
    if keeper is not None:
        outcome.state_notes.extend(keeper.notes)
        keeper.close()
    result = finish_run(
        plan,
        start,
        outcome,
        runs_dir,
        on_record,
        finished=now_utc(),
        duration_seconds=time.perf_counter() - clock,
    )
    if interrupted is not None:
        interrupted.result = result  # type: ignore[attr-defined]
        raise interrupted
    return result


def state_keeper(plan: Plan, runs_dir: Path, run_id: str, identity: str) -> Keeper | None:
    """The durable checkpoints of ``plan``'s run (docs/how-to/incremental.md), whose notebook
    the records name ``identity`` (:func:`~.._records.identity.notebook_identity`); None when it
    neither writes nor reads any (a notebook read from a URL has no place to keep them)."""
    if not (plan.checkpoints or plan.reuse or plan.resume_of) or is_url(plan.notebook):
        return None
    policy = Policy(
        # A run given secrets writes none: a state may hold a secret in pieces no search
        # finds (the reuse of other runs' checkpoints stays, checked as any other).
        save=plan.checkpoints and not plan.secrets,
        reuse=plan.reuse or plan.resume_of is not None,
        run_id=None if plan.resume_of is None else plan.resume_of[0],
        before=None if plan.resume_of is None else plan.resume_of[1],
    )
    keeper = Keeper(
        plan.job,
        runs_dir,
        run_id,
        identity,
        policy,
        secret_byte_forms(plan.secrets),
        plan.cell_map.to_source,
    )
    if plan.resume_note:
        keeper.notes.append(plan.resume_note)
    if plan.checkpoints and plan.secrets:
        keeper.notes.append(
            "no checkpoint was written: the run was given secrets, which a stored state could "
            "hold in pieces"
        )
    return keeper


def begin_run(
    plan: Plan,
    runs_dir: Path,
    on_record: OnRecord,
    *,
    started: datetime | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> RunStart:
    """Give ``plan`` a run id and write its record as begun (the engine has not run yet).

    ``started`` defaults to now; ``provenance`` adds keys to the record's provenance (where a
    run that executed elsewhere ran).
    """
    started = now_utc() if started is None else started
    store = RunStore(runs_dir)
    git = None if is_url(plan.notebook) else GitState(plan.loaded_path)
    run_id = new_run_id(plan.loaded_path, started)
    run_path = store.path(run_id)
    output_path = plan.output_path or os.fspath(run_path)
    source_path = notebook_identity(
        plan.notebook if is_url(plan.notebook) else plan.loaded_path, runs_dir
    )
    known: dict[str, Any] = {
        "record_version": RECORD_VERSION,
        "uuid": str(uuid.uuid4()),
        "source": {
            "path": source_path,
            "sha256": plan.sha256,
            "format": plan.source_format,
        },
        "kernel": {
            "name": plan.job.kernel.name,
            "language": plan.job.kernel.language,
            "interpreter": program_path(plan.job.kernel.interpreter),
        },
        "environment": {
            **environment_record(),
            # docs/how-to/reproduce.md: the hash of what is installed where the kernel runs.
            "lock_sha256": lock_sha256(
                None if plan.environment is None else plan.environment.get("packages")
            ),
        },
        "machine": machine_record(),
        # docs/how-to/environments.md: the notebook's own environment (declaration, hash, versions).
        **(
            {}
            if plan.environment is None
            else {"notebook_environment": without_home(plan.environment)}
        ),
        "env_names": plan.env_names,
        "secret_names": sorted(plan.secrets),
        # Too short to search for in outputs without damaging them (see _records/scrub.py).
        "secrets_not_searched": sorted(
            name for name, value in plan.secrets.items() if 0 < len(value) < MIN_SECRET_CHARS
        ),
        "parameters_checked": plan.parameters_checked,
        # A modified run: which cells were replaced, and why (their texts are in the cells).
        "edits": redact(edit_notes(plan.edits), plan.secrets),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        # docs/how-to/lineage.md: the sweep this run is part of.
        **({} if plan.parent_run is None else {"parent_run": plan.parent_run}),
        **(provenance or {}),
    }
    record: dict[str, Any] = {
        "run_id": run_id,
        "status": "running",
        "error_kind": None,
        # One name per notebook, whichever face and working directory ran it.
        "notebook": notebook_identity(plan.notebook, runs_dir),
        "output_path": display_path(output_path),
        "parameters": redact(plan.parameters, plan.secrets),
        "request": redact(plan.request, plan.secrets),
        "started_at": iso(started),
        **known,
    }
    # The injected parameters may hold a secret's value too: the first write is redacted.
    started_notebook = redact(plan.nb, plan.secrets)
    try:
        store.write(run_id, started_notebook, record, final=False)
    except OSError as exc:  # a full disk, a quota: nothing ran yet
        raise RunsDirError(os.fspath(runs_dir), _reason(exc)) from None
    on_record("begin", record)
    plan.job.hooks.on_cell_start.append(cell_teller(plan, run_id, on_record))
    return RunStart(run_id, started, output_path, record, known, git)


def cell_teller(plan: Plan, run_id: str, on_record: OnRecord) -> Callable[[CellStart], None]:
    """An ``on_cell_start`` observer telling ``on_record("at_cell", ...)`` the code cell run
    ``run_id`` is in, as ``failed_cell.index`` counts (the catalog notes it in the run's
    liveness lock: ``runs`` shows it while the run goes)."""
    cell_map = plan.cell_map

    def started(event: CellStart) -> None:
        on_record("at_cell", {"run_id": run_id, "cell": cell_map.to_source(event.index)})

    return started


def finish_run(
    plan: Plan,
    start: RunStart,
    outcome: EngineOutcome,
    runs_dir: Path,
    on_record: OnRecord,
    *,
    finished: datetime,
    duration_seconds: float,
) -> RunResult:
    """Build the result of a run ``plan.nb`` was executed for, write its final run records."""
    annotate_cells(plan.nb, outcome)
    # docs/how-to/reproduce.md: the repository, and the files the notebook read and wrote.
    if start.git is not None and start.git.record is not None:
        start.provenance["git"] = start.git.finished()
    if outcome.files:
        start.provenance["files"] = redact(file_records(outcome.files), plan.secrets)
    annotate_papermill(
        plan.nb,
        outcome,
        parameters=plan.given,
        default_parameters=plan.defaults,
        # As shown in the record: never an absolute home path.
        input_path=start.record["notebook"],
        output_path=start.record["output_path"],
        started=start.started,
        finished=finished,
    )
    # What is stored: streams coalesced, secrets redacted, outputs holding one withheld; the
    # run records also cap each cell's streams (the caller's copy keeps them whole).
    executed = scrub_notebook(plan.nb, plan.secrets)
    recorded, capped = cap_streams(executed)
    output_cut = dict.fromkeys(capped, "stream_cap")
    output_cut.update(dict.fromkeys(outcome.output_lost, "lost"))
    result = build_result(
        run_id=start.run_id,
        notebook_path=plan.notebook,
        output_path=os.fspath(start.output_path),
        parameters=plan.parameters,
        request=plan.request,
        started_at=iso(start.started),
        finished_at=iso(finished),
        duration_seconds=duration_seconds,
        executed=executed,
        outcome=outcome,
        cell_map=plan.cell_map,
        secrets=plan.secrets,
        output_cut=output_cut,
        edited_cells=[edit["index"] for edit in plan.edits],
        resumed_from=None if plan.resume_of is None else plan.resume_of[0],
        # A markdown logbook's front matter (an .ipynb made from one keeps a real code cell).
        front_matter=plan.source_format == "markdown notebook"
        and "front_matter" in plan.nb.metadata,
    )
    result = cast("RunResult", dict(redact(result, plan.secrets)))
    stored = {
        **result,
        "notebook": start.record["notebook"],
        "output_path": start.record["output_path"],
        **start.provenance,
    }
    try:
        RunStore(runs_dir).write(start.run_id, recorded, stored, final=True)
    except OSError as exc:
        _record_unwritten(runs_dir, start, recorded, stored, result, _reason(exc), on_record)
    written = list(recorded.cells)
    copy_failed: OutputWriteError | None = None
    if plan.output_path is not None:
        executed.metadata[RECORD_KEY] = stored
        try:
            # A URL is written by papermill's I/O; a local path atomically, with the usual mode.
            write_notebook(executed, plan.output_path)
        except (OSError, NotebookExecutorError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            copy_failed = OutputWriteError(os.fspath(plan.output_path), reason, result)
    # The cells as written: the catalog indexes them without reading the file back.
    on_record("finish", stored, written)
    if copy_failed is not None:
        raise copy_failed
    return result


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _record_unwritten(
    runs_dir: Path,
    start: RunStart,
    recorded: NotebookNode,
    stored: dict[str, Any],
    result: RunResult,
    reason: str,
    on_record: OnRecord,
) -> None:
    """The final record could not be written (a full disk): write, where the disk allows,
    one that says how the run ended, without the outputs, and tell the catalog; then raise
    :class:`RecordWriteError` holding the result."""
    bare, dropped = drop_outputs(recorded, reason)
    # Indices of the job notebook's cells (the injected parameters cell counted), as the
    # markers in them.
    stored.update(
        record_error=f"the run record could not be written whole: {reason}; cell outputs "
        "not stored",
        output_dropped=dropped,
    )
    written = None  # as the file holds them: the catalog reads them
    try:
        RunStore(runs_dir).write(start.run_id, bare, stored, final=True)
        written = list(bare.cells)
    except OSError as again:
        logger.warning(
            "run %s: its record could not be written (%s); it stays as it began",
            start.run_id,
            _reason(again),
        )
    on_record("finish", stored, written)
    raise RecordWriteError(os.fspath(runs_dir), reason, result)


def prepared_notebook(plan: Plan) -> NotebookNode:
    """The notebook ``plan`` would execute, as papermill's ``--prepare-only`` writes it: the
    parameters injected, papermill's metadata (no times: nothing ran), secrets redacted."""
    annotate_papermill(
        plan.nb,
        None,
        parameters=plan.given,
        default_parameters=plan.defaults,
        input_path=display_path(plan.notebook),
        output_path=None if plan.output_path is None else display_path(plan.output_path),
        started=None,
        finished=None,
    )
    prepared: NotebookNode = redact(plan.nb, plan.secrets)
    return prepared


def first_unfinished_cell(nb: NotebookNode, completed: Iterable[int]) -> int:
    """The code cell that was running when a run stopped: the first one the run executes
    (:func:`~notebook_executor._notebook.code_cell_indices`) not completed."""
    done = set(completed)
    codes = code_cell_indices(nb)
    return next((i for i in codes if i not in done), codes[-1] if codes else 0)
