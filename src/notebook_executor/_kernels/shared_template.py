"""Kernel templates shared by several processes, one fork request at a time.

Two owners share theirs: the run server (``notebook_executor._faces.server``), which forks a
child process for each command it serves, every child inheriting the template's control socket;
and pytest-xdist's controller under ``pytest --notebooks`` (``notebook_executor._faces.
template_lending``), which lends its templates to the workers: a worker's copy of a template
(:meth:`SharedForkServer.lent`) fetches the control socket when first waited for, and the owner
hands it over with :meth:`SharedForkServer.handle`. :func:`adopt` makes such templates the ones
the process's kernel pools fork from (see :func:`.templates.spawn_template`), so the process pays
for no template of its own. The processes take turns on a socket with a ``flock``, each on its
own open file (an inherited descriptor would share its lock with the parent). Closing a
template in another process only closes that process's copy of the socket: the template lives
as long as its owner, and dies with it (``PR_SET_PDEATHSIG``), killing its kernels.

No process waits for ever on the template: the end of its socket may outlive it (held by a
process that inherited it), so its death is seen through a pidfd opened by the owner while the
template is its child (inherited by the owner's children), and every wait (the turn, the
answer) has a deadline, :data:`REPLY_SECONDS`. A template that died, or did not answer in time,
is let go of in that process (:class:`~.forkserver.ForkServerError`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._types import TIMEOUTS
from .forkserver import TEMPLATE_READY_TIMEOUT, ForkServer, ForkServerError, startup_environment
from .inside.sessions import KERNEL_ID

__all__ = ["REPLY_SECONDS", "SharedForkServer", "adopt", "adopt_environment", "adopted"]

#: Longest a process waits for its turn on the template, and then for its answer (seconds):
#: a fork or a reap is answered in milliseconds; past this the template is taken as stuck.
REPLY_SECONDS = TIMEOUTS.template_reply

#: The templates this process's kernel pools fork from, by whether they preload the data
#: modules (empty: the pools spawn their own).
_ADOPTED: dict[bool, SharedForkServer] = {}
#: The templates of notebooks' own environments this process's pools fork from, by the
#: interpreter they run (the run server's: see :func:`adopt_environment`).
_ADOPTED_ENVIRONMENTS: dict[str, SharedForkServer] = {}

#: What a lent template's copy calls to fetch it: its description (:meth:`SharedForkServer.
#: handle`) and its control socket.
Fetch = Callable[[], tuple[dict[str, Any], socket.socket]]


class SharedForkServer(ForkServer):
    """A :class:`ForkServer` whose socket several processes use, one request at a time.

    Parameters
    ----------
    env : dict
        The template's environment.
    lock_path : Path
        The file whose ``flock`` serialises the requests of every process.
    """

    def __init__(
        self,
        env: dict[str, str],
        lock_path: Path,
        *,
        data_modules: bool = True,
        interpreter: str | None = None,
    ) -> None:
        super().__init__(env, data_modules=data_modules, interpreter=interpreter)
        self._lock_path = lock_path
        self._owner = os.getpid()
        self._lock_fd: int | None = None
        self._lock_pid = 0
        #: A lent template's copy: how to fetch it, and how to stop fetching it.
        self._fetch: Fetch | None = None
        self._cancel: Callable[[], None] = lambda: None
        #: The template's pidfd (readable once it exited), and what was read past an answer.
        self._pidfd: int | None = None
        self._pending = b""

    @classmethod
    def lent(
        cls, fetch: Fetch, cancel: Callable[[], None], *, data_modules: bool
    ) -> SharedForkServer:
        """This process's copy of a template another process owns and lends: :meth:`wait_ready`
        calls ``fetch`` (once) for its description and control socket; :meth:`close` calls
        ``cancel`` to interrupt it."""
        server = cls({}, Path(os.devnull), data_modules=data_modules)
        server._owner = 0  # never this process: closing it lets go of this copy only
        server._fetch = fetch
        server._cancel = cancel
        return server

    def spawn(self) -> None:
        """Start the template (nothing to do for a lent one: its owner started it)."""
        if self._fetch is None:
            super().spawn()
            with self._lock:
                if self._process is not None and self._pidfd is None:
                    # While it is this process's child its pid cannot be taken by another.
                    self._pidfd = _pidfd(self._process.pid)

    def wait_ready(self) -> None:
        """Block until the template can fork; a lent one is fetched from its owner first.

        Raises
        ------
        ForkServerError
            The template did not start, or none could be fetched.
        """
        if self._fetch is None:
            super().wait_ready()
            return
        with self._lock:
            if self.pid is not None:
                return
            if self._closed:
                raise ForkServerError("the kernel template is closed")
            try:
                description, control = self._fetch()
            except OSError as exc:
                self._closed = True  # no longer adopted: the pools spawn their own
                raise ForkServerError(f"no kernel template was lent: {exc}") from None
            try:
                self._take(description, control)
            except (KeyError, TypeError, ValueError) as exc:
                self._closed = True
                control.close()
                raise ForkServerError(f"a bad description of the lent template: {exc!r}") from None

    @property
    def borrowed(self) -> bool:
        """Whether this is a copy of a template another process lends (:meth:`lent`)."""
        return self._fetch is not None

    def _take(self, description: dict[str, Any], control: socket.socket) -> None:
        """Become the template of :meth:`handle`'s ``description``, whose control socket
        ``control`` this now owns."""
        if description["interpreter"] != sys.executable:
            # Its kernels would run another Python than this process's native kernel.
            raise ValueError(f"the template runs {description['interpreter']}")
        env = {str(k): str(v) for k, v in dict(description["env"]).items()}
        self._lock_path = Path(str(description["lock"]))
        self.kernel_id = str(description["kernel_id"])
        self.kernel_ids[:] = [self.kernel_id]
        self._env = {**env, KERNEL_ID: self.kernel_id}
        self._startup = startup_environment(self._env)
        self.data_modules = bool(description["data_modules"])
        self.preloaded = [str(name) for name in description["preloaded"]]
        self._modules = frozenset(str(name) for name in description["modules"])
        self._socket = control
        self._reader = control.makefile("rb")
        self.pid = int(description["pid"])
        self._pidfd = _pidfd(self.pid)

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        # The thread lock first: the flock belongs to this process's open file, so a second
        # thread of this process would take it too, and the first thread's unlock would then
        # let another process's request cross the second's answer.
        with self._lock:
            if self._lock_pid != os.getpid():
                self._lock_fd = os.open(
                    self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
                )
                self._lock_pid = os.getpid()
            assert self._lock_fd is not None
            self._take_turn(self._lock_fd)
            try:
                return self._call_locked(request)
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _take_turn(self, fd: int) -> None:
        """The ``flock`` of ``fd``, waited for up to :data:`REPLY_SECONDS` while the template
        lives (another process may be stuck holding it)."""
        deadline = time.monotonic() + REPLY_SECONDS
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            if self.exited():
                self._let_go_locked()
                raise ForkServerError("the kernel template died")
            if time.monotonic() >= deadline:
                raise ForkServerError(f"no turn on the kernel template within {REPLY_SECONDS:g} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    def _read(self) -> dict[str, Any]:
        """The next answer, waited for until the template exits or :data:`REPLY_SECONDS`
        pass (its ready message: its start-up time), never for ever: the socket's other end
        may outlive the template."""
        sock = self._socket
        if sock is None:
            raise ForkServerError("the forking process is not running")
        limit = REPLY_SECONDS if self.pid is not None else TEMPLATE_READY_TIMEOUT
        deadline = time.monotonic() + limit
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        if self._pidfd is not None:
            poller.register(self._pidfd, select.POLLIN)
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self._let_go_locked()
                raise ForkServerError(f"the kernel template did not answer within {limit:g} s")
            ready = {fd for fd, _ in poller.poll(min(left, 1.0) * 1000)}
            if sock.fileno() in ready:
                data = sock.recv(1 << 16)
                if not data:
                    self._let_go_locked()
                    raise ForkServerError("the forking process exited")
                self._pending += data
            elif self._pidfd is not None and self._pidfd in ready:
                self._let_go_locked()
                raise ForkServerError("the kernel template died")
        line, _, self._pending = self._pending.partition(b"\n")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _let_go_locked(self) -> None:
        """Stop using the template from this process (the owner stops it): an answer may be
        owed on the socket, which no later request may take for its own."""
        self._pending = b""
        if os.getpid() == self._owner:
            self._stop_locked()
        else:
            self._close_socket_locked()

    def exited(self) -> bool:
        """Whether the template process has exited (False while unknown: not started)."""
        fd = self._pidfd
        if fd is None:
            return False
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        try:
            return bool(poller.poll(0))
        except OSError:
            return False

    @property
    def running(self) -> bool:
        """Whether the template runs. In a child the template is no child of this process,
        whose ``poll`` would take it for ended (``ECHILD``): it is asked by its pid."""
        if os.getpid() == self._owner:
            return super().running
        if self.pid is None or self._closed or self.exited():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    @property
    def running_here(self) -> bool:
        """Whether this process can still ask the template for kernels (a lent one not
        fetched yet: whether it may)."""
        if self._closed:
            return False
        if self.pid is None:
            return self._fetch is not None
        return self._socket is not None and self.running

    def close(self) -> None:
        """In the owner, stop the template; elsewhere, let go of this process's copy only."""
        if os.getpid() == self._owner:
            super().close()
        else:
            self._closed = True
            self._cancel()
            with self._lock:
                self._close_socket_locked()
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def handle(self) -> tuple[dict[str, Any], int]:
        """What another process needs to share this template, once ready: a description (for
        :meth:`borrowed`) and the control socket's descriptor (to send it, not to close).

        Raises
        ------
        ForkServerError
            The template did not start, or is closed.
        """
        self.wait_ready()
        sock = self._socket
        if sock is None or self._closed:
            raise ForkServerError("the kernel template is closed")
        description = {
            "pid": self.pid,
            "kernel_id": self.kernel_id,
            "env": self._env,
            "data_modules": self.data_modules,
            "preloaded": self.preloaded,
            "modules": sorted(self._modules),
            "lock": os.fspath(self._lock_path),
            "interpreter": self.interpreter or sys.executable,
        }
        return description, sock.fileno()


def _pidfd(pid: int) -> int | None:
    """A pidfd on ``pid`` (None where there is none to have)."""
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def adopt(server: SharedForkServer | None, full: SharedForkServer | None = None) -> None:
    """Make ``server`` the template of every kernel pool of this process (None: their own);
    with ``full``, ``full`` is the one that preloads the data modules, else ``server`` is both."""
    _ADOPTED.clear()
    if server is not None:
        _ADOPTED[False] = server
        _ADOPTED[True] = full if full is not None else server


def adopt_environment(interpreter: str, server: SharedForkServer | None) -> None:
    """Make ``server`` the template of every kernel pool of this process for kernels running
    ``interpreter`` (a notebook's own environment; None: their own again)."""
    if server is None:
        _ADOPTED_ENVIRONMENTS.pop(interpreter, None)
    else:
        _ADOPTED_ENVIRONMENTS[interpreter] = server


def adopted(data_modules: bool = True, interpreter: str | None = None) -> SharedForkServer | None:
    """The template adopted by this process for pools that ask for one preloading the data
    modules (or not), or for kernels running ``interpreter`` (a notebook's own environment),
    while this process can use it."""
    if interpreter is None:
        server = _ADOPTED.get(data_modules)
    else:
        server = _ADOPTED_ENVIRONMENTS.get(interpreter)
    return server if server is not None and server.running_here else None
