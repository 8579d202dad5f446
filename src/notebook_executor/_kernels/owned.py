"""Whether a folder or a program can be trusted by this user: theirs, and closed to others.

One check for every place that runs or serves from a folder another user could have written
to: the run server's folder (:func:`notebook_executor._faces.server.paths.private_folder`) and
the cached per-notebook environments (:mod:`notebook_executor._kernels.environments`).

Imports only the standard library's small modules: every served command imports this.
"""

from __future__ import annotations

import os
import stat

__all__ = ["OPEN_TO_OTHERS", "WRITABLE_BY_OTHERS", "untrusted"]

#: Mode bits that let another user read, change or enter: a private folder has none.
OPEN_TO_OTHERS = 0o077
#: Mode bits that let another user change: a folder others may read has none of these.
WRITABLE_BY_OTHERS = 0o022


def untrusted(
    path: str | os.PathLike[str], *, closed: int = OPEN_TO_OTHERS, folder: bool = True
) -> str | None:
    """Why ``path`` cannot be trusted, in one line that names it; None when it can.

    It can when, not following a symlink, it is a folder (``folder``), or else a regular file
    or a symlink (a program: a venv's ``bin/python`` links to its interpreter), belongs to this
    user, and has none of the mode bits ``closed`` (a symlink's own mode means nothing).
    """
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"cannot read {os.fspath(path)}: {exc.strerror}"
    mode = info.st_mode
    if folder and not stat.S_ISDIR(mode):
        return f"{os.fspath(path)} is not a folder"
    if not folder and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        return f"{os.fspath(path)} is not a file"
    if info.st_uid != os.getuid():
        return f"{os.fspath(path)} belongs to another user"
    if mode & closed and not stat.S_ISLNK(mode):
        how = "open to" if closed & ~WRITABLE_BY_OTHERS else "writable by"
        return f"{os.fspath(path)} is {how} other users (mode {mode & 0o777:o})"
    return None
