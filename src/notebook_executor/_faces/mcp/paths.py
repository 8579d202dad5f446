"""Paths a caller names are confined to the server's root folder, symlinks resolved."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from ..._errors import NotebookExecutorError

__all__ = ["NOTEBOOK_SUFFIXES", "OutsideRoot", "Root"]

#: Extensions of files that may be notebook sources.
NOTEBOOK_SUFFIXES = (".ipynb", ".py", ".md")

#: Folders never listed: tools' caches and environments, not notebooks.
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", ".ipynb_checkpoints"})


class OutsideRoot(NotebookExecutorError):
    """A path resolves outside the server's root folder."""


class Root:
    """The folder tools may read and write; every path a caller gives is checked against it.

    Parameters
    ----------
    folder : path
        The root; resolved once, so a symlinked root is followed.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder).resolve()
        # The root as a whole path: not inside a longer one, followed by a separator (then
        # dropped) or by no further character of a name (then ``.``).
        name, sep = r"\w.\-", re.escape(os.sep)
        self._absolute = re.compile(
            rf"(?<![{name}{sep}])" + re.escape(str(self.folder)) + rf"(?:({sep})|(?![{name}]))"
        )

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the root, or absolute) resolved, if it lies inside the root.

        Raises
        ------
        OutsideRoot
            The path, once ``..`` and symlinks are resolved, is not under the root.
        """
        if not isinstance(path, str) or not path or "\0" in path:
            raise OutsideRoot(f"not a usable path: {path!r}")
        resolved = (self.folder / Path(path).expanduser()).resolve()
        if not resolved.is_relative_to(self.folder):
            raise OutsideRoot(f"{path!r} is outside the server's root folder")
        return resolved

    def relative(self, path: str | os.PathLike[str]) -> str:
        """``path`` as the caller should name it: relative to the root when inside it."""
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = Path.cwd() / candidate
        try:
            return candidate.resolve().relative_to(self.folder).as_posix()
        except ValueError:
            return os.fspath(path)

    def relative_text(self, text: str) -> str:
        """``text`` with each absolute path under the root written relative to it (the root
        itself as ``.``): a caller names files relative to the root, and the server's own
        folders are none of its business."""
        if self.folder == Path(self.folder.anchor):
            return text  # a root of ``/``: every path is already as the caller names it
        return self._absolute.sub(lambda match: "" if match.group(1) else ".", text)

    def notebooks(self, folder: Path, skip: Path | None) -> Iterator[Path]:
        """Files under ``folder`` that may be notebooks, in name order; hidden folders, caches
        and ``skip`` (the runs folder) left out; nothing outside the root is followed."""
        for current, dirs, files in os.walk(folder):
            here = Path(current)
            dirs[:] = sorted(
                name
                for name in dirs
                if not name.startswith(".")
                and name not in _SKIPPED_DIRS
                and (skip is None or (here / name).resolve() != skip)
                and (here / name).resolve().is_relative_to(self.folder)
            )
            for name in sorted(files):
                path = here / name
                if path.suffix in NOTEBOOK_SUFFIXES and path.resolve().is_relative_to(self.folder):
                    yield path
