"""The one exception tree of notebook_executor.

::

    NotebookExecutorError
     ├── NotebookSourceError   missing, unreadable or malformed source; unsupported format
     ├── ParameterError        unknown, missing-required or ill-typed parameter
     ├── RunNotFoundError      no run with that id
     ├── CatalogError          the run catalog cannot be read (``reindex`` rebuilds it)
     ├── RunsDirError          the runs folder cannot hold run records (read-only, no
     │                         permission, a file in the way); also an ``OSError``
     └── OutputWriteError      a run finished and is recorded, but its ``output_path`` copy
                               could not be written (the error holds the result)

Every error is raised for bad input *before* any kernel starts; a failure inside a notebook is
never raised, it is reported in the result dict. Errors carry what caused them and pickle
cleanly, so they cross process boundaries (``execute_many`` workers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CatalogError",
    "NotebookExecutorError",
    "NotebookSourceError",
    "OutputWriteError",
    "ParameterError",
    "RunNotFoundError",
    "RunsDirError",
]


class NotebookExecutorError(Exception):
    """Base class of every error raised by notebook_executor."""


def _printable(name: str) -> str:
    # A message is one line: a name holding a line break (or other control) is shown escaped.
    return name if str(name).isprintable() else repr(name)


class NotebookSourceError(NotebookExecutorError):
    """A notebook source is missing, unreadable, malformed or of an unsupported format.

    Attributes
    ----------
    path : str
        The source path as given.
    reason : str
        What is wrong with it, in one line.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{_printable(path)}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


class ParameterError(NotebookExecutorError):
    """Given parameters do not fit the parameters a notebook declares.

    Attributes
    ----------
    parameter : str
        Name of the (first) offending parameter.
    problems : list of str
        One line per problem found.
    declared : dict
        The notebook's parameters, ``{name: {"type", "default", "help", "required"}}``.
    """

    def __init__(
        self,
        parameter: str,
        problems: Sequence[str],
        declared: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.parameter = parameter
        self.problems = list(problems)
        self.declared = {name: dict(info) for name, info in (declared or {}).items()}
        super().__init__(_format_parameter_problems(self.problems, self.declared))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.parameter, self.problems, self.declared))


def _format_parameter_problems(
    problems: Sequence[str], declared: Mapping[str, Mapping[str, Any]]
) -> str:
    if declared:
        listed = ", ".join(
            f"{name}: {info.get('type', 'any')}"
            + (" (required)" if info.get("required") else f" = {info.get('default')!r}")
            for name, info in declared.items()
        )
    else:
        listed = "none (the notebook has no cell tagged 'parameters')"
    return "; ".join(problems) + f". The notebook's parameters: {listed}"


class RunNotFoundError(NotebookExecutorError, LookupError):
    """No run with the given id exists under the runs directory.

    Attributes
    ----------
    run_id : str
        The id that was looked up.
    """

    def __init__(self, run_id: str, reason: str = "no such run") -> None:
        self.run_id = run_id
        self.reason = reason
        super().__init__(f"{_printable(run_id)}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.run_id, self.reason))


class CatalogError(NotebookExecutorError):
    """The run catalog cannot be read or written.

    The run files stay the truth: ``notebook-executor reindex`` (or
    ``NotebookExecutor.reindex()``) rebuilds the catalog from them.

    Attributes
    ----------
    path : str
        The catalog file.
    reason : str
        What went wrong.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}; run `notebook-executor reindex` to rebuild it")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


class RunsDirError(NotebookExecutorError, OSError):
    """The runs folder cannot hold run records: it cannot be made or written.

    Raised before any kernel starts. A folder that cannot be written can still be browsed
    (``runs``, ``search``, ``show``); only runs and ``reindex`` need to write.

    Attributes
    ----------
    path : str
        The runs folder.
    reason : str
        Why it cannot be written, in one line.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"runs folder {_printable(path)} cannot hold run records: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


class OutputWriteError(NotebookExecutorError):
    """A run finished and is recorded, but its copy at ``output_path`` could not be written.

    The run files under ``runs_dir`` and the catalog hold the run as usual; the run's result
    dict travels with the error.

    Attributes
    ----------
    path : str
        The ``output_path`` given.
    reason : str
        Why it could not be written.
    result : dict
        The run's result dict, as :meth:`NotebookExecutor.execute` would have returned it.
    """

    def __init__(self, path: str, reason: str, result: Mapping[str, Any]) -> None:
        self.path = path
        self.reason = reason
        self.result = dict(result)
        super().__init__(
            f"{_printable(path)}: cannot write the executed notebook: {reason} "
            f"(run {result.get('run_id')} is recorded under the runs directory)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason, self.result))
