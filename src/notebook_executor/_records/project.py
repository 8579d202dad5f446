"""The project's runs folder: the one place every face (API, command line, run server, MCP
server) learns where run records go when it is not told (docs/reference/cli.md).

The rule, from a working folder:

1. the nearest ``runs/`` holding a catalog (``runs/catalog.sqlite``), looked for in the
   working folder and each folder above it, up to the *project folder* (the first one holding
   ``.git`` or ``pyproject.toml``; it is looked in too);
2. else the ``runs-dir`` of ``[tool.notebook-executor]`` in that folder's ``pyproject.toml``
   (a relative one is relative to that folder);
3. else the project folder's ``runs/`` (``./runs`` relative to the project folder, as the
   setting is), so that a first run from a subfolder starts the project's one history.

With no project folder above the working folder, only the working folder's own ``runs/`` is
looked at, and used: a stray ``/tmp/runs`` never takes the runs of every folder under
``/tmp``.

A folder found inside the working folder is given relative to it (``runs``, as before this
rule); one found elsewhere, absolute. The run server's child works in its client's folder, so
a served command gets the answer the client's own process would. The pytest plugin keeps its
own default, and can ask :func:`find_runs_dir` from the folder it chooses.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import InvalidArgumentError
from .._sources.regular import read_regular

__all__ = [
    "CATALOG_NAME",
    "PROJECT_MARKERS",
    "RunsFolder",
    "configured_runs_dir",
    "find_runs_dir",
    "project_root",
]

#: The catalog's file in a runs folder: a ``runs/`` holding one is a project's history.
CATALOG_NAME = "catalog.sqlite"
#: What makes a folder a project's: the runs folder is never looked for above it.
PROJECT_MARKERS = (".git", "pyproject.toml")
#: Most bytes of a ``pyproject.toml`` read for its setting.
_PYPROJECT_LIMIT = 1 << 20


@dataclass(frozen=True)
class RunsFolder:
    """Where run records go, and why there (said by ``-v`` and the headers of ``runs`` and
    ``digest``)."""

    path: Path
    why: str

    def __str__(self) -> str:
        return f"{self.path} ({self.why})"


def project_root(start: str | os.PathLike[str]) -> Path | None:
    """The first folder from ``start`` (absolute) upward holding ``.git`` or
    ``pyproject.toml``; None if there is none."""
    here = Path(start)
    for folder in (here, *here.parents):
        if any(_exists(folder / marker) for marker in PROJECT_MARKERS):
            return folder
    return None


def find_runs_dir(start: str | os.PathLike[str] | None = None) -> RunsFolder:
    """The runs folder of the working folder ``start`` (default: this process's), by the
    module's rule.

    Raises
    ------
    InvalidArgumentError
        The project's ``pyproject.toml`` cannot be read (unreadable, not UTF-8, not TOML), or
        its ``runs-dir`` is not a string naming a folder; the working folder is gone.
    """
    try:
        here = Path.cwd() if start is None else Path(start).absolute()
    except OSError as exc:  # the working folder was removed
        raise InvalidArgumentError(
            f"no runs folder: the working folder is gone ({exc.strerror or exc})"
        ) from None
    project = project_root(here)
    # The working folder, then each one above it up to the project folder.
    levels = 1 if project is None else len(here.relative_to(project).parts) + 1
    for folder in [here, *here.parents][:levels]:
        candidate = folder / "runs"
        if _is_file(candidate / CATALOG_NAME):
            return RunsFolder(_shown(candidate, start, here), "the nearest runs/ with a catalog")
    if project is not None:
        configured = configured_runs_dir(project)
        if configured is not None:
            why = f"runs-dir of {project / 'pyproject.toml'}"
            return RunsFolder(_shown(configured, start, here), why)
    if project is not None:  # the first run, from any folder of the project: its runs/
        return RunsFolder(_shown(project / "runs", start, here), "the project's runs/ (new)")
    return RunsFolder(_shown(here / "runs", start, here), "no project folder: ./runs")


def configured_runs_dir(project: str | os.PathLike[str]) -> Path | None:
    """The ``runs-dir`` of ``[tool.notebook-executor]`` in ``project``'s ``pyproject.toml``,
    relative to ``project``; None when the file or the setting is absent.

    Raises
    ------
    InvalidArgumentError
        As :func:`find_runs_dir`.
    """
    path = Path(project) / "pyproject.toml"
    ours = _settings(path)
    value = ours.get("runs-dir")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise InvalidArgumentError(
            f"{path}: [tool.notebook-executor] runs-dir must be a folder's path as a string, "
            f"got {value!r}"
        )
    folder = Path(project) / Path(value).expanduser()
    if _exists(folder) and not folder.is_dir():
        raise InvalidArgumentError(
            f"{path}: [tool.notebook-executor] runs-dir {value!r} cannot hold run records: "
            "not a folder"
        )
    return folder


def configured_reuse(folder: str | os.PathLike[str]) -> bool | None:
    """The ``reuse`` setting of ``[tool.notebook-executor]`` in the ``pyproject.toml`` of
    ``folder``'s project (docs/how-to/incremental.md); None when there is none.

    Raises
    ------
    InvalidArgumentError
        The file cannot be read, or the setting is not a boolean.
    """
    project = project_root(folder)
    if project is None:
        return None
    path = project / "pyproject.toml"
    value = _settings(path).get("reuse")
    if value is not None and not isinstance(value, bool):
        raise InvalidArgumentError(
            f"{path}: [tool.notebook-executor] reuse must be true or false, got {value!r}"
        )
    return value


def _settings(path: Path) -> dict[str, Any]:
    """``[tool.notebook-executor]`` of the ``pyproject.toml`` at ``path`` ({} without one)."""
    if not _exists(path):
        return {}
    try:
        text = read_regular(path, _PYPROJECT_LIMIT).decode("utf-8")
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"cannot read {path}: not UTF-8 text") from None
    table = _table(_toml(text, path).get("tool"), path, "[tool]")
    return _table(table.get("notebook-executor"), path, "[tool.notebook-executor]")


def _toml(text: str, path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    try:
        document: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "invalid TOML"
        raise InvalidArgumentError(f"cannot read {path}: not valid TOML ({first})") from None
    return document


def _table(value: object, path: Path, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{path}: {name} must be a table, got {value!r}")
    return value


def _shown(folder: Path, start: object, here: Path) -> Path:
    """``folder`` relative to the working folder when inside it and none was given, as
    ``runs`` always was; else as found."""
    if start is None and folder.is_relative_to(here):
        return folder.relative_to(here)
    return folder


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False
