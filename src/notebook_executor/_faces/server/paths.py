"""Where the run server of this user and this interpreter lives: a folder only the user opens.

The folder is ``notebook-executor-<uid>`` under ``$NOTEBOOK_EXECUTOR_RUNTIME_DIR`` (tests give
their own), else ``$XDG_RUNTIME_DIR``, else the temporary folder. The folder the user names in
``$NOTEBOOK_EXECUTOR_RUNTIME_DIR`` is the one used, never another: it is made (mode 0700) when
missing, and when it cannot be (its parent is missing, say) or is not an absolute path, no
server is used and the reason is given. The server's folder is made with mode 0700;
one that exists must belong to the user, be a real folder (no symlink) and be closed to others,
or no server is used. When that folder's sockets would not fit in a socket's path (107 bytes),
the folder goes in a short temporary folder instead (see
:func:`notebook_executor._kernels.socket_paths.socket_base`), named after the one it stands
for, with the same rules. Inside, each server's files carry a key made of the interpreter's path
and this package's version, so a client of another venv, or of another version, never talks
to a server that would run its kernels on the wrong Python.

Imports only the standard library's small modules: every served command imports this.
"""

from __future__ import annotations

import os
import sys

from ..._kernels.owned import untrusted
from ..._kernels.socket_paths import MAX_SOCKET_PATH, SHORT_TEMP_DIRS, socket_base

TYPE_CHECKING = False  # ``typing`` is not imported: it took 3-8 ms of every served command
if TYPE_CHECKING:
    import socket

# Paths are strings here, joined with os.path: pathlib (and the re module it brings) would
# add to every served command's start-up.
# ruff: noqa: PTH102, PTH105, PTH108, PTH112, PTH117, SIM105
_join = os.path.join

__all__ = [
    "IDLE_ENV",
    "NO_SERVER_ENV",
    "RUNTIME_ENV",
    "RuntimeFolderError",
    "ServerFiles",
    "listen_private",
    "server_files",
    "write_private",
]

#: Set to ``1`` to run every command in-process (what ``--no-server`` does for one command).
NO_SERVER_ENV = "NOTEBOOK_EXECUTOR_NO_SERVER"
#: The folder that holds the user's server folder, instead of ``$XDG_RUNTIME_DIR``.
RUNTIME_ENV = "NOTEBOOK_EXECUTOR_RUNTIME_DIR"
#: Seconds a server with no open session and no request waits before it exits.
IDLE_ENV = "NOTEBOOK_EXECUTOR_SERVER_IDLE"
#: The longest socket path below the folder: a session's (``/<key>-s/<session id>.sock``),
#: with room for a longer id.
_SOCKET_TAIL = len("/0123456789ab-s/") + 32 + len(".sock")


class RuntimeFolderError(OSError):
    """The user's server folder cannot be made, or is not private to the user."""


class ServerFiles:
    """The files of one server (one user, one interpreter, one version of this package)."""

    def __init__(self, folder: str, key: str) -> None:
        self.folder = folder
        self.key = key
        self.socket = _join(folder, f"{key}.sock")
        self.pid_file = _join(folder, f"{key}.pid")
        #: Held by the running server for its whole life (one server per key).
        self.lock = _join(folder, f"{key}.lock")
        #: Held by a client while it starts a server (twenty clients start one).
        self.start_lock = _join(folder, f"{key}.start")
        #: The requests of the server's children to its kernel template take turns on it.
        self.fork_lock = _join(folder, f"{key}.fork")
        self.log = _join(folder, f"{key}.log")
        #: The folder of the session holders' sockets.
        self.sessions = _join(folder, f"{key}-s")

    def session_socket(self, session_id: str) -> str:
        return _join(self.sessions, f"{session_id}.sock")


def _digest(data: bytes) -> str:
    """A 64-bit digest of ``data`` (16 hex digits) that tells names apart, not a secure one.

    Two checksums of zlib: every served command computes one, and importing ``hashlib``
    (OpenSSL's start) cost each 6-11 ms of CPU, a tenth of a served ``run``'s client.
    """
    import zlib

    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def server_key(executable: str, version: str) -> str:
    """The key of the server for ``executable`` running this package at ``version``."""
    return _digest(f"{executable}\0{version}".encode())[:12]


def server_files() -> ServerFiles:
    """The files of this user's server for this interpreter, the private folder made.

    Raises
    ------
    RuntimeFolderError
        The folder cannot be made, or exists and is not private to this user.
    """
    base = os.environ.get(RUNTIME_ENV) or ""
    if base:
        _asked_folder(base)
    else:
        base = os.environ.get("XDG_RUNTIME_DIR") or ""
    if not base or not os.path.isdir(base):
        import tempfile

        base = tempfile.gettempdir()
    name = f"notebook-executor-{os.getuid()}"
    short = socket_base(base, name, _SOCKET_TAIL, SHORT_TEMP_DIRS)
    if short is None:
        raise RuntimeFolderError(
            f"{base} is too long for a socket's path (at most {MAX_SOCKET_PATH} bytes), and "
            f"none of {', '.join(SHORT_TEMP_DIRS)} can be written"
        )
    if short != base:
        # Named after the folder it stands for: a server per folder, as when it fits.
        name += "-" + _digest(os.fsencode(base))[:8]
    folder = _join(short, name)
    private_folder(folder)
    from ... import __version__

    return ServerFiles(folder, server_key(sys.executable, __version__))


def _asked_folder(base: str) -> None:
    """Make the folder of ``$NOTEBOOK_EXECUTOR_RUNTIME_DIR`` (mode 0700) when it is missing.

    Raises
    ------
    RuntimeFolderError
        It is not an absolute path, not a folder, or cannot be made.
    """
    if not os.path.isabs(base):
        raise RuntimeFolderError(f"{RUNTIME_ENV} must be an absolute path, not {base!r}")
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        if not os.path.isdir(base):
            raise RuntimeFolderError(f"{RUNTIME_ENV}: {base} is not a folder") from None
    except OSError as exc:
        raise RuntimeFolderError(f"{RUNTIME_ENV}: cannot make {base}: {exc.strerror}") from None


def write_private(path: str, text: str) -> None:
    """Put ``text`` in the file at ``path``, readable by the user only (mode 0600): written
    beside it, then renamed over it, so that a reader sees the old text or the new one."""
    fresh = f"{path}.{os.getpid()}.new"
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(fresh, path)
    except BaseException:
        try:
            os.unlink(fresh)
        except OSError:
            pass
        raise


def listen_private(path: str, backlog: int) -> socket.socket:
    """A Unix socket bound at ``path`` with mode 0600 (bound under umask 0o177, so that no
    other user can connect even for a moment), listening for ``backlog`` and non-blocking:
    the server's socket, and each session's."""
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    except BaseException:
        listener.close()
        raise
    finally:
        os.umask(old)
    listener.listen(backlog)
    listener.setblocking(False)
    return listener


def private_folder(folder: str | os.PathLike[str]) -> None:
    """Make ``folder`` with mode 0700, or check that the one there is this user's and private.

    Raises
    ------
    RuntimeFolderError
        It is not a folder (a symlink counts as not), not the user's, or open to others.
    """
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise RuntimeFolderError(f"cannot make {folder}: {exc.strerror}") from None
    problem = untrusted(folder)
    if problem is not None:
        raise RuntimeFolderError(problem)
