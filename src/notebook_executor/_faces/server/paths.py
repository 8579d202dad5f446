"""Where the run server of this user and this interpreter lives: a folder only the user opens.

The folder is ``notebook-executor-<uid>`` under ``$NOTEBOOK_EXECUTOR_RUNTIME_DIR`` (tests give
their own), else ``$XDG_RUNTIME_DIR``, else the temporary folder. It is made with mode 0700;
one that exists must belong to the user, be a real folder (no symlink) and be closed to others,
or no server is used. Inside, each server's files carry a key made of the interpreter's path
and this package's version, so a client of another venv, or of another version, never talks
to a server that would run its kernels on the wrong Python.

Imports only the standard library's small modules: every served command imports this.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "IDLE_ENV",
    "NO_SERVER_ENV",
    "RUNTIME_ENV",
    "RuntimeFolderError",
    "ServerFiles",
    "server_files",
]

#: Set to ``1`` to run every command in-process (what ``--no-server`` does for one command).
NO_SERVER_ENV = "NOTEBOOK_EXECUTOR_NO_SERVER"
#: The folder that holds the user's server folder, instead of ``$XDG_RUNTIME_DIR``.
RUNTIME_ENV = "NOTEBOOK_EXECUTOR_RUNTIME_DIR"
#: Seconds a server with no open session and no request waits before it exits.
IDLE_ENV = "NOTEBOOK_EXECUTOR_SERVER_IDLE"


class RuntimeFolderError(OSError):
    """The user's server folder cannot be made, or is not private to the user."""


@dataclass(frozen=True)
class ServerFiles:
    """The files of one server (one user, one interpreter, one version of this package)."""

    folder: Path
    key: str

    @property
    def socket(self) -> Path:
        return self.folder / f"{self.key}.sock"

    @property
    def pid_file(self) -> Path:
        return self.folder / f"{self.key}.pid"

    @property
    def lock(self) -> Path:
        """Held by the running server for its whole life (one server per key)."""
        return self.folder / f"{self.key}.lock"

    @property
    def start_lock(self) -> Path:
        """Held by a client while it starts a server (twenty clients start one)."""
        return self.folder / f"{self.key}.start"

    @property
    def log(self) -> Path:
        return self.folder / f"{self.key}.log"

    @property
    def sessions(self) -> Path:
        """The folder of the session hosts' sockets."""
        return self.folder / f"{self.key}-s"

    def session_socket(self, session_id: str) -> Path:
        return self.sessions / f"{session_id}.sock"


def server_key(executable: str, version: str) -> str:
    """The key of the server for ``executable`` running this package at ``version``."""
    return hashlib.sha256(f"{executable}\0{version}".encode()).hexdigest()[:12]


def server_files() -> ServerFiles:
    """The files of this user's server for this interpreter, the private folder made.

    Raises
    ------
    RuntimeFolderError
        The folder cannot be made, or exists and is not private to this user.
    """
    base = os.environ.get(RUNTIME_ENV) or os.environ.get("XDG_RUNTIME_DIR") or ""
    if not base or not Path(base).is_dir():
        base = tempfile.gettempdir()
    folder = Path(base) / f"notebook-executor-{os.getuid()}"
    private_folder(folder)
    from ... import __version__

    return ServerFiles(folder, server_key(sys.executable, __version__))


def private_folder(folder: Path) -> None:
    """Make ``folder`` with mode 0700, or check that the one there is this user's and private.

    Raises
    ------
    RuntimeFolderError
        It is not a folder (a symlink counts as not), not the user's, or open to others.
    """
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise RuntimeFolderError(f"cannot make {folder}: {exc.strerror}") from None
    try:
        info = os.lstat(folder)
    except OSError as exc:
        raise RuntimeFolderError(f"cannot read {folder}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise RuntimeFolderError(f"{folder} is not a folder")
    if info.st_uid != os.getuid():
        raise RuntimeFolderError(f"{folder} belongs to another user")
    if info.st_mode & 0o077:
        raise RuntimeFolderError(f"{folder} is open to other users (mode {info.st_mode & 0o777:o})")
