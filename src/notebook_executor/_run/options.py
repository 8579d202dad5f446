"""The options of one run, named once: what ``execute`` takes, and every face passes on.

:class:`RunOptions` is the one list. The planner reads it; ``execute_many`` and ``validate``
accept its names as keywords (anything else is refused); the command line builds one from its
flags; the MCP server's ``execute`` tool describes its arguments with :func:`option_help`.
``NotebookExecutor.execute`` spells the names out as keywords, because its signature is the
public contract: a test checks that it takes every one. A new option is a field here (with
its help), a keyword of ``execute``, and what the planner does with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .._errors import InvalidArgumentError
from .._types import USE_DEFAULT, CellEdit, UseDefault
from .checks import PathLike, check_count

__all__ = ["RUN_OPTIONS", "RunOptions", "option_help", "sweep_options"]


@dataclass(frozen=True)
class RunOptions:
    """What a caller says about one run; every field defaults to "not given": None, or
    :data:`USE_DEFAULT` for the limits (where None means "no limit", overriding the executor's).

    The values are checked when the run is planned, not here: a bad one raises the typed
    error of bad input before any kernel starts. These are the keywords of
    :meth:`NotebookExecutor.execute <notebook_executor.NotebookExecutor.execute>`, described
    here once.

    Parameters
    ----------
    output_path : path, optional
        The caller's copy: also write the whole executed notebook here (``.ipynb``, the
        usual file mode; the stream cap is for the run record only; secrets redacted as
        there). The run record is always kept under ``runs_dir``. The source itself is
        refused. The result's ``output_path`` is this copy when given, else the run
        record's ``.ipynb`` (docs/reference/results.md: the path of the executed notebook).
    parameters : mapping, optional
        Values for the notebook's declared parameters.
    timeout, cell_timeout : float or None, optional
        Limits in seconds for the whole run and for each cell. Not given
        (:data:`~notebook_executor.USE_DEFAULT`), the executor's; ``None``, no limit for
        this run even when the executor has one.
    request : str, optional
        Free-text reason for the run, kept in the record.
    cwd : path, optional
        Working directory of the kernel; default the notebook's folder.
    env : mapping, optional
        Extra environment variables for the kernel (their names are recorded, not values).
    secrets : mapping, optional
        Environment variables whose values are never written anywhere: not to the result,
        the run records, the catalog or logs. Occurrences in outputs are redacted; an output
        or scrap that holds one where text search cannot reach (an image's bytes, a
        DataFrame) is withheld. Values shorter than 6 characters are not searched for
        (they would damage ordinary text); the record lists them and a warning is logged.
    edits : list of CellEdit, optional
        A modified run: ``[{"index": i, "source": text, "note": why}]`` replaces cell
        ``i`` (as in ``failed_cell.index``; a code or markdown cell, not the parameters
        cell) for this run only; the source file is not touched. Parameters, placeholders
        and secrets work as in a plain run. The run's ``.md`` shows each edited cell's
        template code, the note (or the request), then the code as run; the ``.ipynb``
        keeps the template code in ``cell.metadata.notebook_executor.original_source``;
        the result lists ``edited_cells``. A bad edit (an index out of range, a text that
        would split the cell in the source's format, an unknown key) is refused before
        any kernel starts.
    environment : {None, "declared", "current"}, optional
        A notebook that declares dependencies (a PEP 723 block, front matter
        ``dependencies:``, ``.ipynb`` metadata ``notebook_executor.dependencies``) runs
        by default on a kernel in an environment made by uv for them, cached by a hash of
        the declaration and the Python (made before the kernel starts, reused after);
        ``"current"`` runs it on the executor's own interpreter instead. Without a
        declaration, every run is on the executor's own interpreter.
    """

    output_path: PathLike | None = field(
        default=None,
        metadata={
            "help": "Also write the executed notebook here (.ipynb); the run record is kept "
            "either way."
        },
    )
    parameters: Mapping[str, Any] | None = field(
        default=None, metadata={"help": "Values for the notebook's declared parameters."}
    )
    timeout: float | UseDefault | None = field(
        default=USE_DEFAULT,
        metadata={"help": "Limit in seconds for the whole run (None: no limit)."},
    )
    cell_timeout: float | UseDefault | None = field(
        default=USE_DEFAULT, metadata={"help": "Limit in seconds for each cell (None: no limit)."}
    )
    request: str | None = field(
        default=None, metadata={"help": "Why the run is made; kept in the run record."}
    )
    cwd: PathLike | None = field(
        default=None,
        metadata={"help": "Working directory of the kernel (default: the notebook's)."},
    )
    env: Mapping[str, str] | None = field(
        default=None,
        metadata={
            "help": "Extra environment variables for the kernel (their names are recorded, "
            "not their values)."
        },
    )
    secrets: Mapping[str, str] | None = field(
        default=None,
        metadata={
            "help": "Environment variables for the kernel whose values are never written anywhere."
        },
    )
    edits: Sequence[CellEdit] | None = field(
        default=None,
        metadata={
            "help": "A modified run: [{'index': i, 'source': text, 'note': why}] replaces "
            "cell i (as in failed_cell.index; a code or markdown cell) for this run only; the "
            "file is not changed. The record shows the template's code, the note, then the "
            "code as run."
        },
    )
    environment: str | None = field(
        default=None,
        metadata={
            "help": "Where a notebook that declares dependencies runs: by default in an "
            "environment made by uv for them (cached); 'current' runs it on the executor's "
            "own interpreter instead."
        },
    )
    reuse: bool | None = field(
        default=None,
        metadata={
            "help": "Start from the longest prefix of cells whose stored checkpoint still "
            "holds (same sources, parameters, environment, files and variables read); the "
            "result's reused_cells and reused_from say what came from which run."
        },
    )
    checkpoints: bool | None = field(
        default=None,
        metadata={
            "help": "Write durable checkpoints of the kernel's state after slow cells (the "
            "default; false: none), for resume and reuse."
        },
    )

    @classmethod
    def from_keywords(cls, where: str, given: Mapping[str, Any]) -> RunOptions:
        """The options given as keywords to ``where`` (a method's name, for the error).

        Raises
        ------
        InvalidArgumentError
            A name that is not an option.
        """
        unknown = sorted(set(given) - set(RUN_OPTIONS))
        if unknown:
            raise InvalidArgumentError(
                f"{where} got an unknown option {unknown[0]!r} (options: {', '.join(RUN_OPTIONS)})"
            )
        return cls(**given)

    def given(self) -> dict[str, Any]:
        """The options given (those not left at their default), as keywords for ``execute``."""
        return {
            option.name: getattr(self, option.name)
            for option in fields(self)
            if getattr(self, option.name) is not option.default
        }

    def replace(self, **changes: Any) -> RunOptions:
        """A copy with ``changes`` made."""
        return replace(self, **changes)


#: Every option's name, in the order of ``execute``'s keywords.
RUN_OPTIONS: tuple[str, ...] = tuple(option.name for option in fields(RunOptions))


def option_help(name: str) -> str:
    """The one-line help of option ``name``, for a face that offers it."""
    for option in fields(RunOptions):
        if option.name == name:
            return str(option.metadata["help"])
    raise KeyError(name)


def sweep_options(
    options: Mapping[str, Any],
    parameter_sets: Iterable[Mapping[str, Any] | None],
    *,
    max_workers: int | None,
    client: object,
    retries: int,
) -> tuple[RunOptions, list[Mapping[str, Any] | None]]:
    """``execute_many``'s arguments checked: its options (neither ``output_path`` nor
    ``parameters``) and its parameter sets, listed.

    Raises
    ------
    InvalidArgumentError
        An argument that ``execute_many`` does not take, or takes otherwise.
    """
    given = RunOptions.from_keywords("execute_many", options)
    if given.output_path is not None:
        raise InvalidArgumentError("execute_many does not take output_path")
    if given.parameters is not None:
        raise InvalidArgumentError("execute_many takes its parameters from parameter_sets")
    check_count("max_workers", max_workers, minimum=1)
    if client is not None and max_workers is not None:
        raise InvalidArgumentError("max_workers applies to local runs, not with client")
    check_count("retries", retries, minimum=0)
    if retries and client is None:
        raise InvalidArgumentError("retries applies to runs on a Dask cluster (client=)")
    try:
        return given, list(parameter_sets)
    except TypeError:
        raise InvalidArgumentError(
            "parameter_sets must be an iterable of parameter mappings, "
            f"got {type(parameter_sets).__name__}"
        ) from None
