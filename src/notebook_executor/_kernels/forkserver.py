"""Cheap fresh kernels: fork them from a template process that has already imported everything.

Starting ``python -m ipykernel_launcher`` costs about a second of CPU, nearly all of it imports
(IPython, ipykernel, zmq, tornado; pandas and scrapbook once the notebook runs). A
:class:`ForkServer` starts, once, a template interpreter (:mod:`.inside.template_server`) that
imports those modules and then forks one child per kernel; each child is still a separate,
fresh kernel process (its own pid, session, sockets, cwd and environment), it just skips the
imports.

Robustness:

- the template holds no zmq context and no thread when it forks (it checks before every fork);
- the template dies with the host (``PR_SET_PDEATHSIG``, and it exits when its control socket
  closes), killing first every process in its kernels' sessions (what their notebooks
  started), and every kernel dies with the template (``PR_SET_PDEATHSIG`` again);
- the host watches each kernel through a pidfd, so it sees a kernel die at once, and signals it
  through the pidfd, so a reused pid is never hit. Exit statuses come from the template, which
  keeps exited children as zombies until the host has read them.

Forking is only used where it gives the same kernel a fresh launch would: Linux, this
interpreter's own ipykernel (the native kernel), and a run environment whose interpreter-level
variables (``PYTHON*``, thread-pool sizes, ...) match the template's. Anything else falls back to
a normal launch.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from .._types import TIMEOUTS
from .host_env import HOST_NAMES, STARTUP_PREFIXES, startup_environment
from .inside.sessions import KERNEL_ID
from .options import KERNEL_OPTIONS, script_command

__all__ = [
    "ForkChannel",
    "ForkServer",
    "ForkServerError",
    "ForkedProcess",
    "fork_supported",
    "startup_environment",
]

logger = logging.getLogger(__name__)


#: Longest the template may take to import its modules.
TEMPLATE_READY_TIMEOUT = TIMEOUTS.template_start


def fork_supported() -> bool:
    """True when this platform can fork kernels from a template (Linux with pidfd)."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(os, "fork")


#: Variables the template keeps besides the start-up ones: the host's harmless ones
#: (:data:`~.host_env.HOST_NAMES`), and what building the kernels' IPython shell there reads
#: (the terminal's size, where configuration lives: a kernel whose values differ builds its
#: own, see inside/ready_shell.py), none of them secret.
_TEMPLATE_NAMES = HOST_NAMES | {"COLUMNS", "LINES", "XDG_CONFIG_HOME"}


def _template_env(env: dict[str, str]) -> dict[str, str]:
    """The environment the template process starts with: the start-up variables of ``env``
    and :data:`_TEMPLATE_NAMES` (and ``LC_*``), nothing else.

    Every kernel forked from the template starts with the template's environment block:
    ``/proc/<kernel>/environ`` shows it, whatever the kernel's ``os.environ`` is set to then,
    and so does ``/proc/<template>/environ``. ``env`` is the host's whole environment (tokens,
    credentials); what a kernel may read of it is the run's own environment, never this.
    """
    return {
        key: value
        for key, value in env.items()
        if key.startswith(STARTUP_PREFIXES) or key in _TEMPLATE_NAMES or key.startswith("LC_")
    }


class ForkServerError(RuntimeError):
    """The template could not start or could not fork."""


def _own_limits() -> dict[str, Any]:
    """This process's ``umask`` (read, never set: another thread may create a file) and
    ``rlimits`` (``NOFILE`` -> [soft, hard]), which a forked kernel takes."""
    import resource

    names = [name for name in dir(resource) if name.startswith("RLIMIT_")]
    limits: dict[str, Any] = {
        "rlimits": {name[7:]: list(resource.getrlimit(getattr(resource, name))) for name in names}
    }
    with contextlib.suppress(OSError, StopIteration, ValueError):
        status = Path("/proc/self/status").read_text().splitlines()
        limits["umask"] = int(next(line for line in status if line.startswith("Umask:"))[6:], 8)
    return limits


class ForkChannel:
    """A process that forks kernels on request, over a Unix socket; thread-safe.

    Speaks ``fork_serving.serve``'s protocol (``inside/kernel_main.py`` describes it).
    Subclasses: :class:`ForkServer` (the template); checkpoints (:mod:`.live`).
    """

    def __init__(self, kernel_ids: list[str]) -> None:
        #: The :data:`~.inside.sessions.KERNEL_ID` values its kernels' processes may carry in the
        #: environment they started with (the template's, or the first kernel's).
        self.kernel_ids = kernel_ids
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._reader: Any = None
        self._closed = False

    def fork(
        self, *, connection_file: str, cwd: str, env: dict[str, str], stderr_path: str
    ) -> ForkedProcess:
        """Fork a kernel that serves ``connection_file``; return a handle on its process (with
        this process's umask and resource limits, as a launched kernel would have them)."""
        request = {
            "op": "fork",
            "connection_file": connection_file,
            "cwd": cwd,
            "env": env,
            "stderr": stderr_path,
            "options": list(KERNEL_OPTIONS),
            **_own_limits(),
        }
        reply = self._call(request)
        if "pid" not in reply:
            raise ForkServerError(str(reply.get("error", "the process did not fork")))
        pid = int(reply["pid"])
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:
            raise ForkServerError(f"cannot watch forked kernel {pid}: {exc}") from None
        return ForkedProcess(self, pid, pidfd)

    def reap(self, pid: int) -> int | None:
        """Exit status of forked kernel ``pid``, or None while it runs."""
        try:
            reply = self._call({"op": "reap", "pid": pid})
        except ForkServerError:
            # The forking process is gone, and its children with it.
            return -signal.SIGKILL
        status = reply.get("status")
        return None if status is None else int(status)

    def _close_socket_locked(self) -> None:
        if self._reader is not None:
            with contextlib.suppress(OSError):
                self._reader.close()
            self._reader = None
        if self._socket is not None:
            # Closing the socket tells the process to kill its children and exit.
            with contextlib.suppress(OSError):
                self._socket.close()
            self._socket = None

    def _stop_locked(self) -> None:
        self._close_socket_locked()

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self._call_locked(request)

    def _call_locked(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request and its answer, with ``self._lock`` held."""
        if self._socket is None:
            raise ForkServerError("the forking process is not running")
        try:
            # MSG_NOSIGNAL: a template gone is an error here, never a SIGPIPE, whatever the
            # calling process does with SIGPIPE.
            self._socket.sendall(json.dumps(request).encode() + b"\n", socket.MSG_NOSIGNAL)
            return self._read()
        except (OSError, ValueError) as exc:
            self._stop_locked()
            raise ForkServerError(f"the forking process failed: {exc}") from None

    def _read(self) -> dict[str, Any]:
        line = self._reader.readline() if self._reader is not None else b""
        if not line:
            raise ForkServerError("the forking process exited")
        reply: dict[str, Any] = json.loads(line)
        return reply


class ForkServer(ForkChannel):
    """A template interpreter that forks kernels on request; thread-safe.

    Parameters
    ----------
    env : dict
        The environment the template's start-up variables come from (it starts with those and
        a few harmless others, :func:`_template_env`); runs whose start-up variables differ
        from them are not forked (see :meth:`compatible`).
    data_modules : bool, default True
        Preload the common data modules (scrapbook, pandas, numpy) besides ipykernel's own;
        without them the template is ready in about half the time.
    interpreter : str, optional
        The Python the template runs, and so its kernels: a notebook's own environment's
        (default: this interpreter).
    """

    def __init__(
        self, env: dict[str, str], *, data_modules: bool = True, interpreter: str | None = None
    ) -> None:
        #: The template's :data:`~.inside.sessions.KERNEL_ID`: forked kernels, and what they fork
        #: without a new program, carry it in the environment they started with.
        self.kernel_id = uuid.uuid4().hex
        super().__init__([self.kernel_id])
        self._env = {**_template_env(env), KERNEL_ID: self.kernel_id}
        self.data_modules = data_modules
        self._preload = "all" if data_modules else "kernel"
        self._startup = startup_environment(self._env)
        self._process: subprocess.Popen[bytes] | None = None
        #: The Python the template runs (None: this one), and so its kernels.
        self.interpreter = interpreter
        self.pid: int | None = None
        self.preloaded: list[str] = []
        self._modules: frozenset[str] = frozenset()

    def compatible(self, env: dict[str, str], cwd: Path) -> bool:
        """Whether a kernel for ``env`` and ``cwd`` may be forked from this template.

        Not when interpreter start-up variables differ, nor when ``cwd`` holds a module that
        would shadow one the template has imported (``scrapbook.py`` next to the notebook): a
        launched kernel would import the local file, a forked one already has the package.
        """
        if startup_environment(env) != self._startup:
            return False
        try:
            names = [entry.name for entry in Path(cwd).iterdir()]
        except OSError:
            return False
        return not any(name.partition(".")[0] in self._modules for name in names)

    @property
    def running(self) -> bool:
        """True once the template has started and until it exits or is closed."""
        return self._process is not None and self._process.poll() is None and not self._closed

    def start(self) -> None:
        """Start the template and wait until it has imported its modules (blocking)."""
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        """Start the template process without waiting for it.

        On Linux the template dies with the thread that calls this (``PR_SET_PDEATHSIG``):
        call it from a thread that lives as long as the server.
        """
        with self._lock:
            if self._closed:
                raise ForkServerError("the fork server is closed")
            if self._process is not None:
                return
            host, child = socket.socketpair()
            try:
                self._process = subprocess.Popen(
                    [
                        *script_command("__nbx_template__", self.interpreter),
                        str(child.fileno()),
                        str(os.getpid()),
                        self._preload,
                        *KERNEL_OPTIONS,
                    ],
                    env=self._env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    pass_fds=(child.fileno(),),
                    start_new_session=True,
                    cwd=tempfile.gettempdir(),
                )
            except BaseException:
                host.close()
                raise
            finally:
                child.close()
            self._socket = host
            self._reader = host.makefile("rb")

    def starting_socket(self) -> socket.socket | None:
        """While the template is starting, the socket its readiness arrives on (readable once
        :meth:`wait_ready` would not block), for a caller that waits on several; else None."""
        return self._socket if self.pid is None and not self._closed else None

    def wait_ready(self) -> None:
        """Block until the template has imported its modules and can fork."""
        with self._lock:
            if self._socket is None:
                raise ForkServerError("the kernel template is not running")
            if self.pid is not None:
                return
            self._socket.settimeout(TEMPLATE_READY_TIMEOUT)
            try:
                hello = self._read()
            except (OSError, ValueError, ForkServerError) as exc:
                self._stop_locked()
                raise ForkServerError(f"the kernel template did not start: {exc}") from None
            if self._socket is not None:
                self._socket.settimeout(None)
            if hello.get("unsafe"):
                self._stop_locked()
                raise ForkServerError(f"the kernel template cannot fork: {hello['unsafe']}")
            self.pid = int(hello["pid"])
            self.preloaded = list(hello.get("preloaded", []))
            self._modules = frozenset(hello.get("modules", []))
            logger.debug("kernel template %s ready (preloaded %s)", self.pid, self.preloaded)

    def close(self) -> None:
        """Stop the template; every kernel still forked from it dies too."""
        self._closed = True
        sock = self._socket
        if sock is not None:
            # Wakes a thread blocked reading from the template, and tells the template to go.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        self._close_socket_locked()
        process, self._process = self._process, None
        if process is not None:
            # The template holds no state worth a polite exit, and may be busy importing for
            # a while yet before it would notice the closed socket. Once ready, it may have
            # children, whose process groups it kills on its way out: give it a moment.
            try:
                process.wait(timeout=0.2 if self.pid is not None else 0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class ForkedProcess:
    """A forked kernel seen like a :class:`subprocess.Popen` (what jupyter_client expects)."""

    stdin = None
    stdout = None
    stderr = None

    def __init__(self, server: ForkChannel, pid: int, pidfd: int) -> None:
        self._server = server
        self.pid = pid
        self._pidfd: int | None = pidfd
        self.returncode: int | None = None

    def _exited(self) -> bool:
        if self._pidfd is None:
            return True
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        return bool(poller.poll(0))

    def poll(self) -> int | None:
        """The exit status once the kernel has exited, else None."""
        if self.returncode is None and self._exited():
            code = self._server.reap(self.pid)
            if code is not None:
                self.returncode = code
                self._close_fd()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Block until the kernel exits; return its exit status."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            if self._pidfd is not None:
                poller = select.poll()
                poller.register(self._pidfd, select.POLLIN)
                poller.poll(50)
            else:
                time.sleep(0.01)
        return code

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the kernel (a no-op once it has exited)."""
        if self.returncode is not None or self._pidfd is None:
            return
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        """SIGKILL the kernel."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM the kernel."""
        self.send_signal(signal.SIGTERM)

    def _close_fd(self) -> None:
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        self._close_fd()


def make_fork_provisioner(manager: Any, server: ForkChannel, stderr_path: str) -> Any:
    """A jupyter_client provisioner for ``manager`` that forks its kernel from ``server``."""
    provisioner = _fork_provisioner_class()(
        kernel_id=manager.kernel_id, kernel_spec=manager.kernel_spec, parent=manager
    )
    provisioner.fork_server = server
    provisioner.stderr_path = stderr_path
    provisioner.connection_file = str(manager.connection_file)
    return provisioner


@functools.cache
def _fork_provisioner_class() -> type:
    """The provisioner class, made once (a traitlets class costs a millisecond to set up)."""
    import asyncio

    from jupyter_client.provisioning.local_provisioner import LocalProvisioner

    class ForkProvisioner(LocalProvisioner):  # type: ignore[misc]
        """LocalProvisioner whose kernel is forked from the template instead of launched."""

        fork_server: ForkChannel
        stderr_path: str
        connection_file: str

        async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
            cwd = str(kwargs.get("cwd") or Path.cwd())
            env = dict(kwargs.get("env") or os.environ)
            loop = asyncio.get_running_loop()
            process = await loop.run_in_executor(
                None,
                lambda: self.fork_server.fork(
                    connection_file=self.connection_file,
                    cwd=cwd,
                    env=env,
                    stderr_path=self.stderr_path,
                ),
            )
            self.process = process  # type: ignore[assignment]
            self.pid = process.pid
            # The child called setsid(): its process group is its own.
            self.pgid = process.pid
            self.cwd = cwd
            return self.connection_info

    return ForkProvisioner
