"""The options of one run, named once: what ``execute`` takes, and every face passes on.

:class:`RunOptions` is the one list. The planner reads it; ``execute_many`` and ``validate``
accept its names as keywords (anything else is refused); the command line builds one from its
flags; the MCP server's ``execute`` tool describes its arguments with :func:`option_help`.
``NotebookExecutor.execute`` spells the names out as keywords, because its signature is the
public contract: a test checks that it takes every one. A new option is a field here (with
its help), a keyword of ``execute``, and what the planner does with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .._errors import InvalidArgumentError
from .._types import USE_DEFAULT, CellEdit, UseDefault
from .checks import PathLike

__all__ = ["RUN_OPTIONS", "RunOptions", "option_help"]


@dataclass(frozen=True)
class RunOptions:
    """What a caller says about one run; every field defaults to "not given": None, or
    :data:`USE_DEFAULT` for the limits (where None means "no limit", overriding the executor's).

    The values are checked when the run is planned, not here: a bad one raises the typed
    error of bad input before any kernel starts.
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
