"""What a record says of where a run came from: paths as shown, interpreter and versions."""

from __future__ import annotations

import functools
import os
import platform
import sys
from pathlib import Path
from typing import Any

from .._sources.remote import is_url

__all__ = [
    "RECORD_VERSION",
    "display_path",
    "environment_record",
    "package_versions",
    "program_path",
    "without_home",
]

#: The version of the record's layout, written in each record.
RECORD_VERSION = 1


def display_path(path: str | os.PathLike[str]) -> str:
    """A path fit for a record: relative to the working directory when under it, ``~``-based
    when under the home folder, never an absolute home path. A URL is kept as given."""
    if is_url(path):
        return os.fspath(path)
    candidate = Path(path)
    if not candidate.is_absolute():
        return candidate.as_posix()
    cwd, home = Path.cwd(), Path.home()
    try:
        resolved = candidate.resolve()
    except OSError:
        return candidate.as_posix()
    with_cwd = _relative_to(resolved, _resolved_folder(os.fspath(cwd)))
    if with_cwd is not None:
        return with_cwd
    under_home = _relative_to(resolved, _resolved_folder(os.fspath(home)))
    if under_home is not None:
        return "~" if under_home == "." else "~/" + under_home
    return resolved.as_posix()


def program_path(program: str | None) -> str | None:
    """The program a kernel runs, fit for a record as :func:`display_path` makes paths, but
    not resolved: a venv's ``bin/python`` is a link, and which venv ran is the point."""
    if program is None:
        return None
    candidate = Path(program)
    if not candidate.is_absolute():
        return candidate.as_posix()
    for base, shown in ((Path.cwd(), ""), (Path.home(), "~/")):
        relative = os.path.relpath(candidate, base)
        if not relative.startswith(".."):
            return shown + Path(relative).as_posix()
    return candidate.as_posix()


def without_home(value: Any) -> Any:
    """``value`` (JSON: a notebook environment's record) with the home folder's absolute path
    shown as ``~`` in every string (a requirement or a frozen version may be a ``file://`` URL
    of a local folder): a record never holds an absolute home path."""
    home = os.fspath(Path.home())
    if isinstance(value, str):
        return value.replace(home, "~") if len(home) > 1 else value
    if isinstance(value, dict):
        return {key: without_home(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_home(item) for item in value]
    return value


def _relative_to(path: Path, base: Path | None) -> str | None:
    if base is None:
        return None
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


@functools.lru_cache(maxsize=16)
def _resolved_folder(folder: str) -> Path | None:
    """``folder`` (the working directory or home) resolved, once per process and folder: every
    record shows paths relative to them, and resolving costs a system call per component."""
    try:
        return Path(folder).resolve()
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    """Versions of the packages a run depends on (computed once per process)."""
    from importlib.metadata import PackageNotFoundError, version

    names = (
        "notebook-executor",
        "nbclient",
        "nbformat",
        "jupyter_client",
        "ipykernel",
        "jupytext",
        "papermill",
        "scrapbook",
        "pandas",
    )
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def environment_record() -> dict[str, Any]:
    """Interpreter and package versions for the provenance record."""
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": sys.platform,
        "packages": package_versions(),
    }
