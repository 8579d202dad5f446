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
    ValidateAnswer     validate
     └── ValidateProblem  each item of its "problems"
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = [
    "CellChange",
    "DeclaredParameters",
    "EnvironmentInfo",
    "FailedCell",
    "NotebookDiff",
    "OutputCut",
    "ParameterInfo",
    "RunDiff",
    "RunResult",
    "SearchHit",
    "ValidateAnswer",
    "ValidateProblem",
]


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
    error_kind: str | None
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
