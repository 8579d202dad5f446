"""Paths a caller names are confined to the server's root folder, symlinks resolved."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from ..._sources.confine import OutsideRoot, confined
from ..._sources.discover import walk_notebooks

__all__ = ["Confined", "OutsideRoot", "Root"]


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
        if not isinstance(path, str):
            raise OutsideRoot(f"not a usable path: {path!r}")
        return confined(path, self.folder)

    def confined(self, path: str) -> Confined:
        """``path`` as a notebook the executor reads, checked now and at every later read."""
        return Confined(self, path)

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

    def notebooks(
        self,
        folder: Path,
        skip: Path | None,
        skipped: Callable[[Path, str], None] | None = None,
    ) -> Iterator[Path]:
        """The notebooks under ``folder``, as ``check`` finds them (the format table's
        sniffers, the same folders left out), and also without ``skip`` (the runs folder);
        nothing outside the root is followed; ``skipped`` is told of files that look like
        notebooks and are not (see :func:`~..._sources.discover.walk_notebooks`)."""

        def keep(path: Path) -> bool:
            try:
                return confined(path, self.folder) != skip
            except OutsideRoot:
                return False

        return walk_notebooks(folder, keep=keep, skipped=skipped)


class Confined(os.PathLike[str]):
    """A caller's notebook path, confined to the root each time it is used.

    The executor reads a session's notebook again at every step: each read names the file
    through ``os.fspath``, which resolves the path again (:meth:`Root.resolve`). A notebook
    swapped between two steps for a symlink to a file outside the root is refused then, never
    read.

    Raises
    ------
    OutsideRoot
        At creation, and at any later use, when the path resolves outside the root.
    """

    def __init__(self, root: Root, path: str) -> None:
        self._root = root
        self._path = path
        root.resolve(path)

    def __fspath__(self) -> str:
        return os.fspath(self._root.resolve(self._path))

    def __repr__(self) -> str:
        return f"Confined({self._path!r})"
