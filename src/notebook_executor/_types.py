"""The shapes of what the public API returns, as ``TypedDict``\\ s.

Every answer is a plain ``dict`` (``json.dumps`` works on it as is); these types only name
its keys and their values, for type checkers and readers. A test pins each one against the
real answers, so the keys here are the keys returned.

::

    RunResult          execute, execute_many, get_run, runs       (docs/reference/results.md)
     ├── FailedCell    its "failed_cell"
     └── OutputCut     each item of its "output_cut"
    ParameterInfo      each value of inspect_parameters           (docs/reference/api.md)
    SearchHit          each item of search                        (docs/how-to/search.md)
    NotebookDiff       diff_notebooks                             (docs/how-to/review.md)
     └── CellChange    each item of its "cells"
    RunDiff            diff_runs
    CellEdit           an item of execute's edits (an argument)  (docs/how-to/modified-runs.md)
    ValidateAnswer     validate
     └── ValidateProblem  each item of its "problems"
    StepResult         Session.run, Session.rerun_from            (docs/how-to/sessions.md)
     └── CellText      each item of its "outputs"
    EvaluationResult   Session.evaluate
     └── EvaluationFailure  its "error"
    Digest             digest                                     (docs/how-to/modified-runs.md)
     ├── DigestStatus, DigestParameter (└── DigestValue), DigestScraps, DigestTrend
     ├── DigestFailure each item of its "errors" (a recurring error)
     └── DigestNote    each item of its "notes"

Beside them, :data:`ErrorKind` (the values of ``error_kind``), :data:`USE_DEFAULT` (a limit
not given, so that ``None`` can mean "no limit") and :class:`Timeouts` (every time limit of
running a notebook, with its default: :data:`TIMEOUTS`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

__all__ = [
    "TIMEOUTS",
    "USE_DEFAULT",
    "CellChange",
    "CellEdit",
    "CellText",
    "DeclaredParameters",
    "Digest",
    "DigestFailure",
    "DigestNote",
    "DigestParameter",
    "DigestScraps",
    "DigestStatus",
    "DigestTrend",
    "DigestValue",
    "EnvironmentInfo",
    "ErrorKind",
    "EvaluationFailure",
    "EvaluationResult",
    "FailedCell",
    "JobState",
    "JobStatus",
    "NotebookDiff",
    "OutputCut",
    "ParameterInfo",
    "RunDiff",
    "RunResult",
    "SearchHit",
    "StepResult",
    "Timeouts",
    "UseDefault",
    "ValidateAnswer",
    "ValidateProblem",
]


#: Why a run failed: a result's ``error_kind`` when its ``status`` is ``"error"``.
ErrorKind = Literal["cell_error", "timeout", "kernel_died", "cancelled", "interrupted"]


class UseDefault(enum.Enum):
    """The type of :data:`USE_DEFAULT`."""

    USE_DEFAULT = "USE_DEFAULT"

    def __repr__(self) -> str:
        return "USE_DEFAULT"


#: "Not given": a limit left at this takes the executor's default, so ``None`` can mean "no
#: limit" for one call (``NotebookExecutor(timeout=5).execute(nb, timeout=None)``).
USE_DEFAULT = UseDefault.USE_DEFAULT


@dataclass(frozen=True)
class Timeouts:
    """Every time limit of running a notebook, in seconds, as httpx's ``Timeout`` names its
    own: one typed object, the defaults here (:data:`TIMEOUTS`), read wherever a limit is.

    ``run`` and ``cell`` are the caller's (``timeout`` and ``cell_timeout``; None: no limit);
    the cell loop (``_run/cell_loop.py``) applies them and the start limit. The others bound
    the kernel engine's own waits.
    """

    #: The whole run (a session's step); None: no limit.
    run: float | None = None
    #: Each cell; None: no limit.
    cell: float | None = None
    #: A kernel's start, up to its first answer, unless the run's deadline is nearer (the cell
    #: loop gives an engine the smaller: ``RunJob.start_timeout``).
    kernel_start: float = 60.0
    #: A warm kernel started ahead of any run, or a template process (nothing waits on them).
    template_start: float = 120.0
    #: A cell's output still arriving after its reply, when the cell has no limit.
    output_drain: float = 300.0
    #: A cancelled cell's wait on the kernel loop, once its kernel is told to stop.
    cancel_wait: float = 10.0
    #: A session kernel's stop or close on the kernel loop; then it is killed by process id.
    kernel_stop: float = 20.0
    #: A checkpoint's answer from the kernel.
    checkpoint: float = 30.0
    #: A shared template's answer (or a turn at it), before it is taken for dead.
    template_reply: float = 60.0
    #: Making a notebook's declared environment (uv), before uv is stopped.
    environment_build: float = 900.0


#: The defaults of every limit (:class:`Timeouts`).
TIMEOUTS = Timeouts()


class CellEdit(TypedDict, total=False):
    """One cell replaced for one run: ``execute(..., edits=[CellEdit(...)])``.

    ``index`` (required) is a position in ``read_notebook(source).cells``, as in
    ``failed_cell.index``; ``source`` (required) the code or markdown the cell holds for this
    run; ``note`` why, shown as written in the run's ``.md`` between the template's code and
    the code as run (the logbook pattern writes "Modified to be extra friendly and casual as
    requested"); the run's request stands in when there is none.
    """

    index: int
    source: str
    note: str | None


class FailedCell(TypedDict):
    """The cell a run failed in (or was running when it timed out or its kernel died)."""

    #: Index in ``read_notebook(source).cells`` (all cells counted, the injected
    #: parameters cell not).
    index: int
    source: str
    ename: str
    evalue: str
    #: ANSI-free lines.
    traceback: list[str]


class OutputCut(TypedDict):
    """A cell whose outputs the run record does not hold whole."""

    index: int
    #: ``"stream_cap"`` (a stream over the cap was cut) or ``"lost"``.
    reason: str


class RunResult(TypedDict):
    """The result dict of one run (docs/reference/results.md); its keys, in this order.

    ``status`` is ``"running"`` only for a run still going, as ``runs()`` lists it.
    """

    run_id: str
    status: Literal["success", "error", "running"]
    #: ``None`` or one of ``"cell_error"``, ``"timeout"``, ``"kernel_died"``,
    #: ``"cancelled"``, ``"interrupted"``.
    error_kind: ErrorKind | None
    #: The source path as given.
    notebook: str
    #: Where the executed notebook is: the caller's copy when ``execute`` was given
    #: ``output_path``, else the run record's ``.ipynb`` under ``runs_dir``.
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
    output_cut: list[OutputCut]
    #: Source indices of the cells a modified run replaced (``execute(edits=...)``, see
    #: docs/how-to/modified-runs.md); empty for a plain run.
    edited_cells: list[int]
    #: Source indices of the code cells whose state and outputs came from an earlier run's
    #: checkpoint (``reuse``, ``resume``: docs/how-to/incremental.md), and that run's id.
    reused_cells: list[int]
    reused_from: str | None
    #: The run this one resumed (``resume``), else None.
    resumed_from: str | None
    #: Why stored states were or were not used, and what a resume did not undo, in words.
    state_notes: list[str]


class ParameterInfo(TypedDict):
    """One declared parameter, as ``inspect_parameters`` describes it."""

    name: str
    #: ``"int"``, ``"str"``, ``"list"``, ``"any"``...
    type: str
    #: The Python value; ``None`` when required.
    default: Any
    help: str
    required: bool


#: What a notebook declares it needs (docs/how-to/environments.md), as ``inspect_environment`` and
#: the
#: ``environment`` attribute of ``inspect_parameters``' answer describe it: the requirements,
#: the ``requires-python`` specifier (or None), and where the declaration is (``"script
#: block"``, ``"front matter"`` or ``"metadata"``).
EnvironmentInfo = TypedDict(
    "EnvironmentInfo",
    {"dependencies": list[str], "requires-python": "str | None", "declared_in": str},
)


class DeclaredParameters(dict[str, ParameterInfo]):
    """``inspect_parameters``' answer: ``{name: ParameterInfo}`` (a plain mapping, as
    docs/reference/api.md says), which also carries the notebook's declared dependencies as its
    ``environment`` attribute (an :data:`EnvironmentInfo`, or None)."""

    def __init__(
        self, parameters: dict[str, ParameterInfo], environment: EnvironmentInfo | None = None
    ) -> None:
        super().__init__(parameters)
        self.environment = environment


class SearchHit(TypedDict):
    """One run found by ``search``, best first."""

    run_id: str
    notebook: str
    status: str
    started_at: str
    #: ``request``, ``parameters``, ``narrative``, ``code``, ``output``, ``error`` or
    #: ``scraps``.
    where: str
    snippet: str
    score: float


class CellChange(TypedDict):
    """One cell added, removed or modified between two notebooks."""

    op: Literal["added", "removed", "modified"]
    index_a: int | None
    index_b: int | None
    cell_type: str
    #: A unified diff of the sources.
    source_diff: str
    outputs_changed: bool


class NotebookDiff(TypedDict):
    """What ``diff_notebooks`` answers."""

    identical: bool
    cells: list[CellChange]
    metadata_changed: bool


class RunDiff(TypedDict):
    """What ``diff_runs`` answers; only differing names appear."""

    status: list[str | None]
    parameters: dict[str, list[Any]]
    scraps: dict[str, list[Any]]
    #: Package versions that differ (``None`` where one run had no such package): from the
    #: notebook's own environment when it declares dependencies (docs/how-to/environments.md).
    packages: dict[str, list[Any]]
    #: The recorded inputs that differ (docs/how-to/reproduce.md): ``files`` (path -> the two
    #: sha256, None where a run did not open it), ``git`` (commit, branch, dirty), ``machine`` and
    #: ``environment`` (the lock's hash), each ``[a, b]``; only what differs appears.
    inputs: dict[str, Any]
    cells: list[CellChange]


class ValidateProblem(TypedDict):
    """One problem ``validate`` found."""

    #: Index in ``read_notebook(path).cells``, or ``None`` for the whole notebook.
    cell: int | None
    severity: Literal["error", "warning"]
    message: str


class ValidateAnswer(TypedDict):
    """What ``validate`` answers: valid when no problem is an error."""

    valid: bool
    problems: list[ValidateProblem]


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


class EvaluationFailure(TypedDict):
    """The exception an evaluation raised."""

    ename: str
    evalue: str
    traceback: list[str]


class EvaluationResult(TypedDict):
    """What :meth:`Session.evaluate <notebook_executor.Session.evaluate>` returns."""

    status: Literal["success", "error"]
    output: str
    error: EvaluationFailure | None


class DigestStatus(TypedDict):
    """Runs of one status, with the first and the last of them."""

    status: str
    count: int
    first_at: str
    first_run_id: str
    last_at: str
    last_run_id: str


class DigestValue(TypedDict):
    """One value a parameter took: in how many runs, and the last of them."""

    value: Any
    runs: int
    last_run_id: str


class DigestParameter(TypedDict):
    """The values one parameter of one notebook took: a range of numbers, or a set.

    ``min``/``max`` and their run ids are given when every value is a number; ``values`` lists
    the most recent distinct values for a set (``more_values`` counts the others), and is empty
    for a range.
    """

    notebook: str
    name: str
    kind: Literal["range", "set"]
    runs: int
    distinct: int
    min: float | None
    max: float | None
    min_run_id: str | None
    max_run_id: str | None
    values: list[DigestValue]
    more_values: int


class DigestScraps(TypedDict):
    """The JSON scraps of a notebook's latest successful run."""

    notebook: str
    run_id: str
    started_at: str
    scraps: dict[str, Any]


class DigestTrend(TypedDict):
    """How one numeric scrap moved across the runs that recorded it (oldest to newest)."""

    notebook: str
    name: str
    runs: int
    first: float
    first_run_id: str
    last: float
    last_run_id: str
    min: float
    min_run_id: str
    max: float
    max_run_id: str


class DigestFailure(TypedDict):
    """Failed runs grouped by notebook, error kind, cell and exception name.

    ``evalue`` is the last run's; ``run_ids`` the newest few, ``last_run_id`` first.
    """

    notebook: str
    error_kind: str | None
    ename: str | None
    evalue: str | None
    cell: int | None
    count: int
    first_at: str
    last_at: str
    last_run_id: str
    run_ids: list[str]


class DigestNote(TypedDict):
    """A request, or an edit note, with the newest run that carried it and how many did."""

    kind: Literal["request", "edit"]
    text: str
    cell: int | None
    notebook: str
    run_id: str
    started_at: str
    status: str
    runs: int


class Digest(TypedDict):
    """What :meth:`NotebookExecutor.digest <notebook_executor.NotebookExecutor.digest>` returns.

    ``text`` is the same digest as markdown, within the ``limit_chars`` asked for. ``omitted``
    counts, per list, the items left out of it (each list holds at most ``MAX_ITEMS``, 50).
    """

    notebook: str | None
    since: str | None
    runs: int
    statuses: list[DigestStatus]
    parameters: list[DigestParameter]
    scraps: list[DigestScraps]
    trends: list[DigestTrend]
    errors: list[DigestFailure]
    notes: list[DigestNote]
    omitted: dict[str, int]
    text: str


#: A job's status (docs/how-to/jobs.md).
JobState = Literal["queued", "running", "success", "error", "cancelled", "interrupted"]


class JobStatus(TypedDict):
    """What a job is doing (docs/how-to/jobs.md): :meth:`Job.status
    <notebook_executor.Job.status>`, ``job show --json``, the MCP tool ``job_status``."""

    job_id: str
    status: JobState
    #: The running code cell's index, as ``failed_cell.index`` counts; None when none runs.
    cell: int | None
    #: Seconds since the job was started, up to its end.
    elapsed_seconds: float
    #: The last lines of the job's output (at most 20, each cut to 200 characters).
    tail: list[str]
    #: The result dict once the job finished (a list of them for a sweep), else None.
    result: Any
