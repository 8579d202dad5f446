"""One name per notebook in the records, whichever face and working directory ran it.

The rule: a notebook is named by its path relative to the *project* it belongs to, the parent
folder of the runs folder its runs are recorded in (``runs/`` in the project by default), or
the folder whose ``pyproject.toml`` names that runs folder as its ``runs-dir``. So
``notebook-executor run notebooks/hello.py`` in the project, ``run ../notebooks/hello.py
--runs-dir ../runs`` from ``notebooks/scratch``, ``execute("/abs/proj/notebooks/hello.py")``
and the MCP server started anywhere with ``--root /abs/proj`` all record
``notebooks/hello.py``. A notebook outside the project keeps the name
:func:`~.provenance.display_path` gives it (relative to the working directory, ``~``-based, or
absolute); a URL is kept as given.

Records written before this rule named a notebook relative to the working directory of the
time: :func:`repaired_identity` finds the name the rule gives them, which ``reindex`` records.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from .._errors import InvalidArgumentError
from .._sources.remote import is_url
from .project import configured_runs_dir, project_root
from .provenance import display_path

__all__ = ["notebook_identity", "project_folder", "project_notebooks", "repaired_identity"]


def project_folder(runs_dir: str | os.PathLike[str]) -> Path | None:
    """The project a runs folder belongs to, resolved (None if it cannot be): the folder
    whose ``pyproject.toml`` names it as ``runs-dir`` (see :mod:`.project`), else its parent."""
    try:
        runs = Path(runs_dir).resolve()
    except (OSError, RuntimeError):
        return None
    parent = runs.parent
    project = project_root(parent)
    if project is None or project == parent:
        return parent
    try:
        configured = configured_runs_dir(project)
        if configured is not None and configured.resolve() == runs:
            return project
    except (InvalidArgumentError, OSError, RuntimeError):
        pass  # the runs folder's finder reports a bad setting; a name needs none
    return parent


def notebook_identity(path: str | os.PathLike[str], runs_dir: str | os.PathLike[str]) -> str:
    """The name run records give notebook ``path`` (relative to the working directory, or
    absolute) when runs are recorded in ``runs_dir``; see the module's notes."""
    if is_url(path):
        return os.fspath(path)
    project = project_folder(runs_dir)
    if project is not None:
        try:
            resolved = Path(path).resolve()
        except (OSError, RuntimeError):
            resolved = None
        if resolved is not None and resolved.is_relative_to(project):
            return resolved.relative_to(project).as_posix()
    return display_path(path)


def repaired_identity(
    recorded: str,
    runs_dir: str | os.PathLike[str],
    notebooks: Callable[[], Sequence[str]] | None = None,
) -> str:
    """The name a record written under the old rule (``recorded``: relative to an unknown
    working directory, ``~``-based or absolute) has under :func:`notebook_identity`.

    An absolute or ``~`` path is named from where it points. A relative one is matched
    against the project's files: the longest tail of it (after any ``..``) that names a file
    in the project is the notebook; else the one notebook of the project (``notebooks()``:
    their names, :func:`project_notebooks` by default) whose name ends with it. A name that
    matches no file, or several, is kept.
    """
    if not recorded or is_url(recorded):
        return recorded
    project = project_folder(runs_dir)
    if project is None:
        return recorded
    given = Path(recorded).expanduser() if recorded.startswith("~") else Path(recorded)
    if given.is_absolute():
        try:
            resolved = given.resolve()
        except (OSError, RuntimeError):
            return recorded
        inside = resolved.is_relative_to(project)
        return resolved.relative_to(project).as_posix() if inside else recorded
    parts = [part for part in PurePosixPath(Path(recorded).as_posix()).parts if part != ".."]
    for start in range(len(parts)):
        tail = PurePosixPath(*parts[start:])
        if _is_file(project / tail):
            return tail.as_posix()
    if not parts:
        return recorded
    wanted = PurePosixPath(*parts).as_posix()
    names = notebooks() if notebooks is not None else project_notebooks(project)
    matches = [name for name in names if name == wanted or name.endswith("/" + wanted)]
    return matches[0] if len(matches) == 1 else recorded


def project_notebooks(project: Path) -> list[str]:
    """The notebooks under ``project``, named relative to it (the folder walk of ``check``)."""
    from .._sources.discover import walk_notebooks

    return [path.relative_to(project).as_posix() for path in walk_notebooks(project)]


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False
