"""Kernels' private folders: made locked by their owner, swept once the owner is gone.

Each kernel gets a folder for its connection file, IPC sockets and stderr log, removed when the
kernel stops. Kernel folders live only in one parent per user that this library creates,
``$TMPDIR/notebook-executor-<uid>/`` (mode 0700), and the parent is used only while it is
provably this user's own: a real folder (not a symlink), owned by this user, that nobody else
may write to. Anything else in the temporary directory is never looked at, let alone removed.

A kernel's IPC sockets live in its folder, and a socket's path is limited (107 bytes on Linux,
103 on macOS). When ``$TMPDIR`` is too long to hold them (a long ``$TMPDIR`` made every kernel
die at start), the parent goes in the first of :data:`SHORT_TEMP_DIRS` that is a writable
folder instead (:func:`kernel_base`, through :func:`.socket_paths.socket_base`), with the same
ownership rules.

A host killed outright (``SIGKILL``) cannot remove its kernels' folders, so the owner holds an
exclusive ``flock`` on each folder for as long as it uses it: the OS drops the lock when the
owner dies, however it dies, and a later :func:`sweep_stale` (any process of the same user)
removes the kernel folders in that parent whose lock is free. Pids are never involved in
that, so processes in other pid namespaces sharing the folder are safe.

The owner also records its kernel's session in the folder (:meth:`Workdir.record_session`),
while it holds the lock: a folder whose lock is free but which holds that record was left by a
dead owner, whatever its age, and :func:`sweep_stale` first kills what is left of that session
(:func:`.inside.sessions.sweep`, which checks that the processes are the kernel's own).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

from .inside import sessions
from .socket_paths import MAX_SOCKET_PATH, SHORT_TEMP_DIRS, socket_base

__all__ = [
    "PREFIX",
    "KernelRootError",
    "Workdir",
    "kernel_base",
    "kernel_root",
    "make_workdir",
    "sweep_stale",
]

#: Name prefix of a kernel's folder inside the kernel root (short: IPC socket paths are short).
PREFIX = "k-"

#: The kernel root's name in the temporary directory, before the user id.
ROOT_PREFIX = "notebook-executor-"

#: A kernel folder's full name, as :func:`tempfile.mkdtemp` makes it with :data:`PREFIX`.
_KERNEL_FOLDER = re.compile(r"k-[A-Za-z0-9_]{8}")

#: What a kernel adds below the kernel root: its folder, then a socket named after a port.
_SOCKET_TAIL = len("/k-XXXXXXXX/k-65535")

#: Folders younger than this (seconds) are never swept, unless they hold a session record:
#: their owner may not hold its lock yet.
STALE_AFTER = 60.0

#: The file in a kernel's folder recording the kernel's session (see :mod:`.inside.sessions`).
SESSION_RECORD = "session.json"

logger = logging.getLogger(__name__)

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: folders are only removed by their owner
    fcntl = None  # type: ignore[assignment]


class KernelRootError(OSError):
    """The parent folder of kernel folders is not provably this user's own, or no temporary
    folder is short enough to hold a kernel's sockets."""


class Workdir:
    """A kernel's folder, locked while this object is open."""

    def __init__(self, path: Path, lock_fd: int | None) -> None:
        self.path = path
        self._lock_fd = lock_fd

    def record_session(self, pid: int, ids: list[str]) -> None:
        """Record kernel ``pid`` (the leader of its session), its start time and its
        :data:`~.inside.sessions.KERNEL_ID` values, for a sweep after its owner dies. Only while
        the folder's lock is held: a record in an unlocked folder means its owner is gone."""
        started = sessions.start_time(pid)
        if self._lock_fd is None or started is None:
            return
        record = json.dumps({"pid": pid, "started": started, "ids": ids}).encode()
        # One write of a hundred bytes to a new file (no rename: creating a file is the cost
        # here): a sweep reads all of it, or nothing it can parse and then leaves alone.
        with contextlib.suppress(OSError):
            fd = os.open(
                self.path / SESSION_RECORD,
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                0o600,
            )
            try:
                os.write(fd, record)
            finally:
                os.close(fd)

    def remove(self) -> None:
        """Delete the folder, then release its lock. Safe to call more than once."""
        shutil.rmtree(self.path, ignore_errors=True)
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def kernel_base() -> Path:
    """The temporary folder kernel roots go in: ``tempfile.gettempdir()`` when a socket path
    in it fits, else the first of :data:`SHORT_TEMP_DIRS` that fits and can be written.

    Raises :class:`KernelRootError` when none can hold a kernel's sockets.
    """
    preferred = Path(tempfile.gettempdir())
    base = socket_base(
        os.fspath(preferred), f"{ROOT_PREFIX}{_uid()}", _SOCKET_TAIL, SHORT_TEMP_DIRS
    )
    if base is not None:
        return Path(base)
    raise KernelRootError(
        f"the temporary folder {os.fspath(preferred)!r} is too long to hold kernel sockets "
        f"(a socket path holds at most {MAX_SOCKET_PATH} bytes) and none of "
        f"{', '.join(SHORT_TEMP_DIRS)} can be written: set TMPDIR to a shorter folder"
    )


def kernel_root(*, create: bool = True, base: Path | None = None) -> Path | None:
    """This user's parent of kernel folders in the temporary directory (``base``, by default
    :func:`kernel_base`).

    Made with mode 0700 when missing (with ``create``; else None is returned). Raises
    :class:`KernelRootError` when the name is taken by something that is not provably this
    user's private folder: a symlink, a file, a folder of another user, or one that others may
    write to. It is then left alone; pointing ``TMPDIR`` at a private folder gets past it.
    """
    parent = kernel_base() if base is None else base
    root = parent / f"{ROOT_PREFIX}{_uid()}"
    if create:
        with contextlib.suppress(FileExistsError):
            root.mkdir(mode=0o700)
    try:
        info = root.lstat()
    except FileNotFoundError:
        if create:
            raise
        return None
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "it is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "it is not a folder"
    elif hasattr(os, "getuid") and info.st_uid != os.getuid():
        problem = f"it belongs to user id {info.st_uid}"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = "other users may write to it"
    if problem is not None:
        raise KernelRootError(
            f"refusing to keep kernel files in {root}: {problem} (set TMPDIR to a private folder)"
        )
    return root


def make_workdir() -> Workdir:
    """A new private folder (mode 0700) in :func:`kernel_root`, locked until removed."""
    root = kernel_root()
    assert root is not None
    path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    return Workdir(path, _lock(path))


def sweep_stale(base: Path | None = None) -> list[Path]:
    """Remove kernel folders whose owner has gone, and kill what is left of their kernels'
    sessions; return the removed folders.

    Only folders named as :func:`make_workdir` names them, inside this user's own
    :func:`kernel_root` of ``base`` (default: :func:`kernel_base`), unlocked, and older than
    :data:`STALE_AFTER` seconds or holding a session record, are removed.
    """
    if fcntl is None:
        return []
    removed: list[Path] = []
    try:
        root = kernel_root(create=False, base=base)
        if root is None:
            return removed
        entries = list(os.scandir(root))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not _KERNEL_FOLDER.fullmatch(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or info.st_uid != os.getuid():
                continue
        except OSError:
            continue
        record = Path(entry.path) / SESSION_RECORD
        if now - info.st_mtime < STALE_AFTER and not record.exists():
            continue
        fd = _lock(Path(entry.path))
        if fd is None:
            continue  # its owner is alive
        try:
            _sweep_session(record)
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
        finally:
            os.close(fd)
    return removed


def _sweep_session(record: Path) -> None:
    """Kill what is left of the session recorded in ``record`` (if any, and readable)."""
    try:
        data = json.loads(record.read_bytes())
        pid, started, ids = int(data["pid"]), int(data["started"]), data["ids"]
    except (OSError, ValueError, TypeError, KeyError):
        return
    if isinstance(ids, list) and all(isinstance(value, str) for value in ids):
        killed = sessions.sweep(pid, started, ids)
        if killed:
            logger.info("killed %d processes left by the kernel of a killed host", len(killed))


def _lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive lock on folder ``path``, or None if taken."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
