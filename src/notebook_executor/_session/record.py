"""A session as a run: its log, and its run files brought up to date after every step.

The run files are written by the run path's own writer (:func:`~notebook_executor._run.runner.
begin_run` and :func:`~notebook_executor._run.runner.finish_run`), so a session's record is a run
record like any other (the catalog indexes it, ``get_run`` reads it); the session adds
``metadata.notebook_executor.session``: ``{"id", "open", "log"}``, the log in order, each entry
one of ``step``, ``evaluate``, ``edit``, ``restore`` and ``close``. Its provenance is a run's
(git, machine, the lock's hash), the files read and written adding up over its steps. Each write
replaces the files atomically, so a crash leaves the record of the last step.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._records.redaction import redact
from .._run.runner import RunStart, begin_run, finish_run
from .._times import iso, now_utc
from .._types import ErrorKind, RunResult
from ..engine import CellFailure, EngineOutcome
from .texts import clip

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from .._run.plan import Plan

__all__ = ["LOG_TEXT_CHARS", "MAX_LOG_ENTRIES", "SessionRecord"]

#: Most characters of a text in a log entry (code, output, a source before or after an edit).
LOG_TEXT_CHARS = 2_000

#: Most entries the log keeps; beyond, the oldest are dropped (and counted).
MAX_LOG_ENTRIES = 2_000

OnRecord = Callable[[str, Mapping[str, Any]], None]


class SessionRecord:
    """The run record of one session: cells' latest executions, the log, the run files."""

    def __init__(self, session_id: str, plan: Plan, runs_dir: Path, on_record: OnRecord) -> None:
        self.session_id = session_id
        self.runs_dir = runs_dir
        self.on_record = on_record
        self.secrets = plan.secrets
        self.log: list[dict[str, Any]] = []
        self.dropped = 0
        self.open = True
        #: Each code cell's latest execution (job index -> the cell as it ran).
        self.cells: dict[int, NotebookNode] = {}
        self.completed: set[int] = set()
        self.failure: CellFailure | None = None
        #: The cell whose ``sys.exit(0)`` ended the notebook, while no later cell has run.
        self.exited: int | None = None
        self.seconds: dict[int, float] = {}
        self.started_cells: dict[int, str] = {}
        self.language_info: dict[str, Any] = {}
        #: The files the session's cells read and wrote over all its steps (``{path: "r" |
        #: "w" | "rw"}``, :func:`~notebook_executor._records.files.note_files`), recorded as a
        #: run's are.
        self.files: dict[str, str] = {}
        #: Writes the kernel's widget state into the notebook recorded, as a run does.
        self.save_widgets: Callable[[NotebookNode], None] | None = None
        self._clock = time.perf_counter()
        self.start: RunStart = begin_run(plan, runs_dir, on_record)

    @property
    def run_id(self) -> str:
        return self.start.run_id

    def add(self, kind: str, **fields: Any) -> None:
        """Append a log entry (texts clipped, the rest not kept; secrets redacted when
        written)."""
        entry: dict[str, Any] = {"kind": kind, "at": iso(now_utc())}
        for name, value in fields.items():
            entry[name] = clip(value, LOG_TEXT_CHARS, None) if isinstance(value, str) else value
        self.log.append(entry)
        if len(self.log) > MAX_LOG_ENTRIES:
            del self.log[0]
            self.dropped += 1

    def never_started(self, nb: NotebookNode, first: int | None, exc: BaseException) -> None:
        """The session's kernel did not start, or its opening was cut off (Ctrl-C, the server
        gone): closed, with its first code cell (job index ``first``) failed as a run's is, so
        the record claims no success it did not reach."""
        self.add("close", why="the kernel did not start")
        self.open = False
        if first is None:
            return
        if isinstance(exc, KeyboardInterrupt):
            kind: ErrorKind = "cancelled"
            ename, message = "KeyboardInterrupt", "the session's opening was interrupted"
        else:
            kind, ename = "kernel_died", "KernelStartError"
            message = str(exc) or type(exc).__name__
            if not message.startswith("the kernel did not start"):
                message = f"the kernel did not start: {message}"
        self.cells[first] = copy.deepcopy(nb.cells[first])
        self.failure = CellFailure(first, kind, ename, message, [])

    def cell_ran(
        self,
        index: int,
        cell: NotebookNode,
        *,
        completed: bool,
        seconds: float,
        started: str,
        exited: bool = False,
    ) -> None:
        """Keep cell ``index``'s latest execution: the cell itself, not a copy, so that a
        later cell's ``update_display`` still reaches its outputs (as in a run)."""
        self.cells[index] = cell
        self.seconds[index] = round(seconds, 6)
        self.started_cells[index] = started
        if completed:
            self.completed.add(index)
        else:
            self.completed.discard(index)
        if exited:
            self.exited = index
        elif self.exited is not None and index >= self.exited:
            self.exited = None

    def cut_off(self, index: int, cell: NotebookNode, failure: CellFailure) -> None:
        """Cell ``index`` (``cell``, as the source has it) was the next to run when a Ctrl-C
        ended the step outside every cell: kept as not run, the step's ``failure`` on it, so
        that the record claims no success its cells did not reach (as a run's first
        unfinished cell)."""
        self.cells[index] = copy.deepcopy(cell)
        self.seconds.pop(index, None)
        self.started_cells.pop(index, None)
        self.completed.discard(index)
        if self.exited is not None and index >= self.exited:
            self.exited = None
        self.failure = failure

    def write(self, plan: Plan) -> RunResult:
        """Bring the run files (and the catalog) up to date; return the result dict so far.

        ``plan`` is the latest reading of the source: its cells, each replaced by its latest
        execution where it has one, are the notebook recorded.
        """

        nb = copy.deepcopy(plan.nb)
        for index, cell in self.cells.items():
            if index < len(nb.cells) and nb.cells[index].cell_type == "code":
                nb.cells[index] = copy.deepcopy(cell)
        if self.language_info:
            from .._notebook import from_dict

            nb.metadata["language_info"] = from_dict(dict(self.language_info))
        if self.save_widgets is not None:
            self.save_widgets(nb)
        failure = self.failure
        if failure is not None and failure.index not in self.cells:
            failure = None
        outcome = EngineOutcome(
            completed=sorted(i for i in self.completed if i < len(nb.cells)),
            failure=failure,
            cell_seconds=dict(self.seconds),
            cell_started=dict(self.started_cells),
            exited=self.exited,
            files=self.files,
        )
        self.start.provenance["session"] = redact(
            {"id": self.session_id, "open": self.open, "dropped": self.dropped, "log": self.log},
            self.secrets,
        )
        return finish_run(
            dataclasses.replace(plan, nb=nb),
            self.start,
            outcome,
            self.runs_dir,
            self.on_record,
            finished=now_utc(),
            duration_seconds=time.perf_counter() - self._clock,
        )
