"""The shapes of what the public API returns, as ``TypedDict``\\ s.

Every answer is a plain ``dict`` (``json.dumps`` works on it as is); these types only name
its keys and their values, for type checkers and readers. A test pins each one against the
real answers, so the keys here are the keys returned.

::

    RunResult          execute, execute_many, get_run, runs       (SPEC section 4)
     ├── FailedCell    its "failed_cell"
     └── OutputCut     each item of its "output_cut"
    ParameterInfo      each value of inspect_parameters           (SPEC section 3)
    SearchHit          each item of search                        (SPEC section 10)
    NotebookDiff       diff_notebooks                             (SPEC section 11)
     └── CellChange    each item of its "cells"
    RunDiff            diff_runs
    CellEdit           an item of execute's edits (an argument)  (SPEC section 16)
    ValidateAnswer     validate
     └── ValidateProblem  each item of its "problems"
    StepResult         Session.run, Session.rerun_from            (SPEC section 15)
     └── CellText      each item of its "outputs"
    EvaluationResult   Session.evaluate
     └── EvaluationFailure  its "error"
    Digest             digest                                     (SPEC section 17)
     ├── DigestStatus, DigestParameter (└── DigestValue), DigestScraps, DigestTrend
     ├── DigestFailure each item of its "errors" (a recurring error)
     └── DigestNote    each item of its "notes"

Beside them, :data:`ErrorKind` (the values of ``error_kind``) and :data:`USE_DEFAULT` (a limit
not given, so that ``None`` can mean "no limit").
"""

from __future__ import annotations

import enum
from typing import Any, Literal, TypedDict

__all__ = [
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
    "NotebookDiff",
    "OutputCut",
    "ParameterInfo",
    "RunDiff",
    "RunResult",
    "SearchHit",
    "StepResult",
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
    """The result dict of one run (SPEC section 4); its keys, in this order.

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
    #: Source indices of the cells a modified run replaced (``execute(edits=...)``, SPEC
    #: section 16); empty for a plain run.
    edited_cells: list[int]


class ParameterInfo(TypedDict):
    """One declared parameter, as ``inspect_parameters`` describes it."""

    name: str
    #: ``"int"``, ``"str"``, ``"list"``, ``"any"``...
    type: str
    #: The Python value; ``None`` when required.
    default: Any
    help: str
    required: bool


#: What a notebook declares it needs (SPEC section 19), as ``inspect_environment`` and the
#: ``environment`` attribute of ``inspect_parameters``' answer describe it: the requirements,
#: the ``requires-python`` specifier (or None), and where the declaration is (``"script
#: block"``, ``"front matter"`` or ``"metadata"``).
EnvironmentInfo = TypedDict(
    "EnvironmentInfo",
    {"dependencies": list[str], "requires-python": "str | None", "declared_in": str},
)


class DeclaredParameters(dict[str, ParameterInfo]):
    """``inspect_parameters``' answer: ``{name: ParameterInfo}`` (a plain mapping, as SPEC
    section 3 says), which also carries the notebook's declared dependencies as its
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
    #: notebook's own environment when it declares dependencies (SPEC section 19).
    packages: dict[str, list[Any]]
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
