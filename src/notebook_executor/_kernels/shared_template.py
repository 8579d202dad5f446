"""A kernel template shared by the processes a run server forks, one fork request at a time.

The run server (``notebook_executor._faces.server``) starts one template
(:class:`~.forkserver.ForkServer`) and forks a child process for each command it serves; every
child inherits the template's control socket. :func:`adopt` makes the template the one the
child's kernel pools fork from (see :func:`.templates.spawn_template`), so a command served by a
warm server pays for no template of its own. The children take turns on the socket with a
``flock``, each on its own open file (an inherited descriptor would share its lock with the
parent). Closing it in a child only closes the child's copy of the socket: the template lives
as long as the server, and dies with it (``PR_SET_PDEATHSIG``), killing its kernels.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

from .forkserver import ForkServer

__all__ = ["SharedForkServer", "adopt", "adopted"]

_ADOPTED: SharedForkServer | None = None


class SharedForkServer(ForkServer):
    """A :class:`ForkServer` whose socket several processes use, one request at a time.

    Parameters
    ----------
    env : dict
        The template's environment.
    lock_path : Path
        The file whose ``flock`` serialises the requests of every process.
    """

    def __init__(self, env: dict[str, str], lock_path: Path) -> None:
        super().__init__(env)
        self._lock_path = lock_path
        self._owner = os.getpid()
        self._lock_fd: int | None = None
        self._lock_pid = 0

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._lock_pid != os.getpid():
            self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._lock_pid = os.getpid()
        assert self._lock_fd is not None
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            return super()._call(request)
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    @property
    def running(self) -> bool:
        """Whether the template runs. In a child the template is no child of this process,
        whose ``poll`` would take it for ended (``ECHILD``): it is asked by its pid."""
        if os.getpid() == self._owner:
            return super().running
        process = self._process
        if process is None or self._closed:
            return False
        try:
            os.kill(process.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    @property
    def running_here(self) -> bool:
        """Whether this process can still ask the template for kernels."""
        return self._socket is not None and not self._closed

    def close(self) -> None:
        """In the server, stop the template; in a child, let go of the child's copy only."""
        if os.getpid() == self._owner:
            super().close()
            return
        with self._lock:
            self._socket = None
            self._reader = None


def adopt(server: SharedForkServer | None) -> None:
    """Make ``server`` the template of every kernel pool of this process (None: their own)."""
    global _ADOPTED
    _ADOPTED = server


def adopted() -> SharedForkServer | None:
    """The template adopted by this process, while it runs."""
    server = _ADOPTED
    return server if server is not None and server.running_here else None
