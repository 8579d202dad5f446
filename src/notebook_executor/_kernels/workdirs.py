"""Kernels' private folders: made locked by their owner, swept once the owner is gone.

Each kernel gets a folder ``nbx-*`` in the temporary directory for its connection file, IPC
sockets and stderr log, removed when the kernel stops. A host killed outright (``SIGKILL``)
cannot remove them, so the owner holds an exclusive ``flock`` on the folder for as long as it
uses it: the OS drops the lock when the owner dies, however it dies, and a later
:func:`sweep_stale` (any process of the same user) removes folders whose lock is free. Pids are
never involved, so processes in other pid namespaces sharing the folder are safe.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["PREFIX", "Workdir", "make_workdir", "sweep_stale"]

#: Name prefix of a kernel's folder in the temporary directory.
PREFIX = "nbx-"

#: Folders younger than this (seconds) are never swept: their owner may not hold its lock yet.
STALE_AFTER = 60.0

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: folders are only removed by their owner
    fcntl = None  # type: ignore[assignment]


class Workdir:
    """A kernel's folder, locked while this object is open."""

    def __init__(self, path: Path, lock_fd: int | None) -> None:
        self.path = path
        self._lock_fd = lock_fd

    def remove(self) -> None:
        """Delete the folder, then release its lock. Safe to call more than once."""
        shutil.rmtree(self.path, ignore_errors=True)
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def make_workdir() -> Workdir:
    """A new private folder (mode 0700), locked by this process until removed."""
    path = Path(tempfile.mkdtemp(prefix=PREFIX))
    return Workdir(path, _lock(path))


def sweep_stale(root: Path | None = None) -> list[Path]:
    """Remove this user's kernel folders whose owner has gone; return the removed ones."""
    if fcntl is None:
        return []
    base = Path(tempfile.gettempdir()) if root is None else root
    removed: list[Path] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or info.st_uid != os.getuid():
                continue
            if now - info.st_mtime < STALE_AFTER:
                continue
        except OSError:
            continue
        fd = _lock(Path(entry.path))
        if fd is None:
            continue  # its owner is alive
        try:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
        finally:
            os.close(fd)
    return removed


def _lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive lock on folder ``path``, or None if taken."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
