"""The one check of a path against the folder it is confined to.

A server for others (``notebook-executor mcp``) reads only files inside its root folder: the
sources a client names, at every read (a session reads its notebook again at each step), and
the ``.env`` files a notebook's declared variables are looked up in. Each of those reads goes
through :func:`confined`, which follows ``..`` and every symlink first: a file inside the root
that is, or becomes, a symlink to a file outside it is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from .._errors import NotebookExecutorError

__all__ = ["OutsideRoot", "confined"]


class OutsideRoot(NotebookExecutorError):
    """A path resolves outside the root folder it is confined to."""


def confined(path: str | os.PathLike[str], root: Path) -> Path:
    """``path`` (relative to ``root``, or absolute) resolved, if it lies inside ``root``.

    ``root`` must be resolved already. ``..`` and symlinks are followed (a missing file's
    path is resolved as far as it exists), so the path returned names the file that would be
    read now.

    Raises
    ------
    OutsideRoot
        ``path`` is not a usable path, or, resolved, is not under ``root``.
    """
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str) or not text or "\0" in text:
        raise OutsideRoot(f"not a usable path: {text!r}")
    resolved = (root / Path(text).expanduser()).resolve()
    if not resolved.is_relative_to(root):
        raise OutsideRoot(f"{text!r} is outside the server's root folder")
    return resolved
