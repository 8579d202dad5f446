"""The one exception tree of notebook_executor.

::

    NotebookExecutorError
     ├── NotebookSourceError   missing, unreadable or malformed source; unsupported format
     │                         (also a ``ValueError``)
     ├── ParameterError        unknown, missing-required or ill-typed parameter; a declared
     │                         environment variable found nowhere (also a ``ValueError``)
     ├── InvalidArgumentError  an argument that is not acceptable: wrong type, out of range,
     │   │                     options that do not go together (also a ``ValueError``)
     │   ├── OutputPathError   ``output_path`` cannot take the executed notebook's copy
     │   └── SearchQueryError  a search query that cannot be read
     ├── RunNotFoundError      no run with that id (also a ``LookupError``)
     ├── EditConflictError     the file or cell changed since it was read; nothing written
     ├── CatalogError          the run catalog cannot be read (``reindex`` rebuilds it)
     ├── RunsDirError          the runs folder cannot hold run records (read-only, no
     │                         permission, a file in the way); also an ``OSError``
     ├── OutputWriteError      a run finished and is recorded, but its ``output_path`` copy
     │                         could not be written (the error holds the result)
     ├── ClusterError          the Dask cluster cannot take the runs (no ``dask`` extra,
     │                         unreachable scheduler, a folder too big to ship)
     ├── DependencyError       a notebook's declared dependencies cannot be installed (a
     │                         requirement uv cannot resolve, no Python satisfying
     │                         ``requires-python``, no network and nothing cached)
     ├── ReportError           the report's folder cannot be written, or holds files that
     │                         were not written by a report
     ├── KernelStartError      a session's kernel could not be started (also a
     │                         ``RuntimeError``)
     └── ExecutorClosedError   the NotebookExecutor, or a Session of it, was closed (also a
                               ``RuntimeError``)

    KeyboardInterrupt
     └── RunCancelled          (``notebook_executor.engine``) a run stopped by Ctrl-C or by
                               ``execute(cancel=...)``: raised after the run is recorded as
                               ``error_kind: "cancelled"``; carries the engine's outcome

Every error about input (the notebook, its parameters, an argument) is raised *before* any
kernel starts, and is also a ``ValueError``, so code that expects the builtin kind catches
it. A failure inside a notebook is never raised, it is reported in the result dict. Errors
carry what caused them and pickle cleanly, so they cross process boundaries
(``execute_many`` workers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CatalogError",
    "ClusterError",
    "DependencyError",
    "EditConflictError",
    "ExecutorClosedError",
    "InvalidArgumentError",
    "KernelStartError",
    "NotebookExecutorError",
    "NotebookSourceError",
    "OutputPathError",
    "OutputWriteError",
    "ParameterError",
    "ReportError",
    "RunNotFoundError",
    "RunsDirError",
    "SearchQueryError",
]


class NotebookExecutorError(Exception):
    """Base class of every error raised by notebook_executor."""


def _printable(name: str) -> str:
    # A message is one line: a name holding a line break (or other control) is shown escaped.
    return name if str(name).isprintable() else repr(name)


class NotebookSourceError(NotebookExecutorError, ValueError):
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


class ParameterError(NotebookExecutorError, ValueError):
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

    The run records stay the truth: ``notebook-executor reindex`` (or
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


class RecordWriteError(RunsDirError):
    """A run ran, but its run record could not be written whole (a full disk, a quota).

    The record written when the run began is replaced, where the disk allows, by one that
    says how the run ended, without the cells' outputs (each marked), and whose
    ``record_error`` says why; the catalog is told the same. The run's result dict travels
    with the error.

    Attributes
    ----------
    path : str
        The runs folder.
    reason : str
        Why the record could not be written, in one line.
    result : dict
        The run's result dict, as :meth:`NotebookExecutor.execute` would have returned it.
    """

    def __init__(self, path: str, reason: str, result: Mapping[str, Any]) -> None:
        self.result = dict(result)
        super().__init__(path, reason)
        self.args = (
            f"run {result.get('run_id')} ran ({result.get('status')}), but its record in "
            f"{_printable(path)} could not be written whole: {reason}",
        )

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason, self.result))


class OutputWriteError(NotebookExecutorError):
    """A run finished and is recorded, but its copy at ``output_path`` could not be written.

    The run records under ``runs_dir`` and the catalog hold the run as usual; the run's result
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


class InvalidArgumentError(NotebookExecutorError, ValueError):
    """An argument is not acceptable: of the wrong type, out of range, or with options that
    do not go together. Raised before anything starts.

    Attributes
    ----------
    argument : str or None
        The name of the argument (or option) at fault, when one is.
    """

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        self.argument = argument
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), str(self), {"argument": self.argument}))


class OutputPathError(InvalidArgumentError):
    """``output_path`` cannot take the executed notebook's copy: not ``.ipynb``, a folder,
    the source itself, or in a folder that is missing or not writable."""


class SearchQueryError(InvalidArgumentError):
    """A search query that cannot be read: empty, too long, or malformed."""


class EditConflictError(NotebookExecutorError):
    """The file or the cell changed since it was read; nothing was written.

    Read the notebook again, then edit.
    """


class ClusterError(NotebookExecutorError):
    """The Dask cluster cannot take the runs: ``dask.distributed`` is not installed, the
    scheduler cannot be reached or its client is closed, or the notebook's folder is too big
    to ship to the workers."""


class DependencyError(NotebookExecutorError):
    """The environment a notebook's declared dependencies call for cannot be made.

    Raised before any kernel starts: uv could not resolve or install a requirement, no Python
    here satisfies ``requires-python``, or uv needs the network and has nothing cached; or the
    environment, or the folder of environments, could have been changed by another user; or,
    for a server confined to a folder, a requirement names a local project outside it.

    Attributes
    ----------
    notebook : str
        The source path as given.
    requirement : str or None
        The requirement at fault (as declared), when uv's message names one.
    reason : str
        What went wrong, in one line (uv's message, condensed).
    """

    def __init__(self, notebook: str, requirement: str | None, reason: str) -> None:
        self.notebook = notebook
        self.requirement = requirement
        self.reason = reason
        about = f"requirement {requirement!r}: " if requirement else ""
        super().__init__(f"{_printable(notebook)}: dependencies: {about}{reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.notebook, self.requirement, self.reason))


class ReportError(NotebookExecutorError):
    """The report cannot be written: its folder cannot be made or written, or holds a file
    that a report did not write (it is never overwritten)."""


class KernelStartError(NotebookExecutorError, RuntimeError):
    """A session's kernel could not be started (by ``open_session``, or for a step that
    needed a fresh kernel); the message says why. A run is not raised this: it is recorded
    with ``error_kind: "kernel_died"``."""


class ExecutorClosedError(NotebookExecutorError, RuntimeError):
    """The :class:`~notebook_executor.NotebookExecutor`, or a
    :class:`~notebook_executor.Session` of it, was closed; open a new one."""


def _rebuild(kind: type[InvalidArgumentError], message: str, state: dict[str, Any]) -> Any:
    return kind(message, **state)


def install_hint(extra: str) -> str:
    """How to install the optional part ``extra`` (an extra), as an error about its absence
    ends: true both from a checkout and once the package is on an index
    (``notebook-executor`` is the name it will have there)."""
    return f"pip install '.[{extra}]' in a checkout, or 'notebook-executor[{extra}]' from a wheel"
