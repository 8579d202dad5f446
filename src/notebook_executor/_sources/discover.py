"""The notebooks in a folder: one walk for ``check`` and for the MCP server's listing.

A file is a notebook when the format table says so (:func:`.formats.is_notebook`: its suffix
names a format and the format's sniffer accepts its head). Hidden files and folders, tools'
caches (``.ipynb_checkpoints``, ``__pycache__``, ``node_modules``, ``site-packages``),
virtual environments (a ``pyvenv.cfg``) and run-record folders (a ``catalog.sqlite``) are left
out: none holds notebooks a person wrote.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from .formats import notebook_verdict

__all__ = ["skipped_folder", "walk_notebooks"]

_SKIPPED_DIRS = frozenset({".ipynb_checkpoints", "__pycache__", "node_modules", "site-packages"})

#: A file whose presence marks a folder as a virtual environment or a runs folder.
_MARKER_FILES = ("pyvenv.cfg", "catalog.sqlite")


def _skipped_dir(folder: Path) -> bool:
    name = folder.name
    return (
        name.startswith(".")
        or name in _SKIPPED_DIRS
        or any((folder / marker).exists() for marker in _MARKER_FILES)
    )


def walk_notebooks(
    folder: Path,
    *,
    keep: Callable[[Path], bool] | None = None,
    skipped: Callable[[Path, str], None] | None = None,
) -> Iterator[Path]:
    """Notebooks under ``folder``, a folder's files (in name order) before its subfolders
    (in name order); ``keep``, when given, must accept each folder and file as well.
    ``skipped`` is told of each file that looks like a notebook and is not one, and why
    (:func:`.formats.notebook_verdict`)."""
    for current, dirs, files in os.walk(folder):
        here = Path(current)
        dirs[:] = sorted(
            name
            for name in dirs
            if not _skipped_dir(here / name) and (keep is None or keep(here / name))
        )
        for name in sorted(files):
            path = here / name
            if name.startswith(".") or (keep is not None and not keep(path)):
                continue
            found, why_not = notebook_verdict(path)
            if found:
                yield path
            elif why_not is not None and skipped is not None:
                skipped(path, why_not)


def skipped_folder(folder: Path) -> bool:
    """Whether :func:`walk_notebooks` leaves ``folder`` out (hidden, a cache, a virtual
    environment, a runs folder); ``pytest --notebooks`` leaves out the same folders."""
    return _skipped_dir(folder)
