"""The run server: one process per user and interpreter, forking a child per command.

``python -m notebook_executor._faces.cli.serve`` (the command line starts it, see
:mod:`.client`, and hands it its ``main``). At start it imports what the commands need and
starts a kernel template (:mod:`notebook_executor._kernels.sharing`); then,
single-threaded so that forking is safe, it answers on its Unix socket:

- ``status``: its pid, version, interpreter, open sessions and commands being served;
- ``stop``: it stops (every child is told first: sessions finish their records);
- ``command``: a command line (``argv``) with its client's working directory, environment,
  umask and resource limits, and the client's standard streams (as descriptors); checked as
  a stranger's request (:func:`.child.read_request`). A forked child becomes the client's
  stand-in (:mod:`.child`): the command runs exactly as it would in the client's process,
  only warm. The child is forked ahead, between commands (a *spare*, waiting on a channel of
  its own), and starts a kernel like the last run's meanwhile: the run of a shell's next
  command, in the same folder and environment, takes it ready (see ``.served.Serving.speculate``). A
  child tells the kernel its run took on that channel, once it answered its client. A command
  that runs no kernel of the server's (``show``, ``runs``, ``jobs``...: see
  :func:`.client.takes_kernel`) gets a child forked for it alone, and the spare waits on.

The server runs with the minimal environment its starting client gave it (see
:func:`.client.server_environment`) and is not dumpable (``PR_SET_DUMPABLE``), nor are its
children: no process of the user reads their environment or memory through ``/proc``.

Requests are read as they arrive, from every connected client at once (a ``select`` over the
listener and the connections whose request is still coming, the server staying single-threaded
because it forks; see :class:`.wire.Arrivals`): a client that sends nothing, or a byte at a
time, holds up no other, and gets a one-line refusal once :data:`REQUEST_SECONDS` passed
without its whole request. At most :data:`MAX_PENDING` requests arrive at once; one more is
refused at once. Whatever one request does, the server answers it in one line and serves on.

It exits after :data:`~.paths.IDLE_ENV` seconds (default 300) with no child (no command being
served, no open session), on SIGTERM, and when its socket file is taken away.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import importlib
import json
import logging
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import wire
from .client import takes_kernel
from .paths import IDLE_ENV, ServerFiles, listen_private, server_files, write_private

if TYPE_CHECKING:
    from .child import Command

__all__ = ["DEFAULT_IDLE_SECONDS", "MAX_PENDING", "REQUEST_SECONDS", "CommandMain", "main"]

#: The command line's ``main(argv) -> exit status``, run by each child.
CommandMain = Callable[[list[str]], int]

logger = logging.getLogger(__name__)

#: At most this many templates of notebooks' own environments (the oldest is stopped).
MAX_ENVIRONMENTS = 4

#: How long a starting server waits for the last one, stopping, to let go of the lock: a
#: stopping server waits up to 20 s for its children, then kills them.
LOCK_WAIT_SECONDS = 30.0

#: Seconds with no child before the server exits, unless ``$NOTEBOOK_EXECUTOR_SERVER_IDLE``.
DEFAULT_IDLE_SECONDS = 300.0
#: ``prctl`` option: whether the process may be dumped, traced, or read through ``/proc``.
_PR_SET_DUMPABLE = 4
#: Seconds a client has to send its whole request once connected (however slowly it sends).
REQUEST_SECONDS = 10.0
#: Requests still arriving, at most: a connection beyond them is refused at once.
MAX_PENDING = 64
#: Modules the children use: imported once, here.
_PRELOAD = (
    "notebook_executor",
    "notebook_executor._faces.cli",
    "notebook_executor._faces.cli.run",
    "notebook_executor._faces.cli.sweep",
    "notebook_executor._faces.cli.review",
    "notebook_executor._faces.cli.session",
    "notebook_executor._run.plan",
    "notebook_executor._run.runner",
    "notebook_executor._records.results",
    "notebook_executor._records.run_markdown",
    "notebook_executor._catalog.store",
    "notebook_executor._review.check",
    "notebook_executor._review.validate",
    "notebook_executor._session.session",
    "notebook_executor._kernels.checkpointed",
    "notebook_executor._run.cell_loop",
    "notebook_executor._kernels.kernel_engine",
    "notebook_executor._kernels.pool",
    "notebook_executor._kernels.live",
    "notebook_executor._parameters.values",
    "notebook_executor._sources.formats",
    # What ``run`` imports as it runs (each child imported them again: 17 ms of a served
    # run's 87 ms of CPU in its child, measured 2026-11-28 with py-spy).
    "notebook_executor._executor",
    "notebook_executor._dispatch.foreground",
    "notebook_executor._catalog.records",
    "notebook_executor._records.lineage",
    "notebook_executor._review.run_edits",
    "notebook_executor._kernels.shared_template",
    "notebook_executor._kernels.loop",
    "notebook_executor._kernels.state_request",
    "notebook_executor._session.opening",
    "notebook_executor._kernels.stand_ins",
    "notebook_executor._faces.server.served",
    "notebook_executor._faces.server.client",
    "email.parser",
    # What reading a notebook in any other form needs (markdown, a percent script that is not
    # of the plainest kind, MyST): each child imported them again, 0.27 s of a served run.
    "jupytext",
    "nbformat.validator",
    "markdown_it",
    # What summarizing a data frame's scrap needs (absent without pyarrow).
    "pyarrow.parquet",
    "jupyter_client",
    "jupyter_client.session",
    "zmq.asyncio",
    "yaml",
    "sqlite3",
)


class _Server:
    def __init__(
        self, files: ServerFiles, idle: float, command: CommandMain, warm: Callable[[], object]
    ) -> None:
        self.files = files
        self.command = command
        self.warm = warm
        self.site: list[tuple[str, int]] = []
        self.idle = idle
        self.started = time.time()
        self.children: dict[int, str] = {}  # pid -> the command it serves
        #: Commands handed to a child since the server started.
        self.served = 0
        self.last_busy = time.monotonic()
        self.stopping = False
        self.template: Any = None
        #: Templates of notebooks' own environments (declared dependencies), by interpreter:
        #: those the children adopt (ready), and those starting.
        self.environments: dict[str, Any] = {}
        self.environments_starting: dict[str, Any] = {}
        self.listener: socket.socket | None = None
        self.socket_id: tuple[int, int] | None = None
        #: The child forked ahead for the next command (its pid, the server's end of its channel).
        self.spare: tuple[int, socket.socket] | None = None
        #: The kernel the last run took, as its child told it: the next spare starts one like it.
        self.last_kernel: dict[str, Any] | None = None
        #: The channels of the children serving a command, until they tell their run's kernel.
        self.reports: dict[socket.socket, int] = {}
        #: The connections whose request is still arriving.
        self.arrivals = wire.Arrivals(REQUEST_SECONDS, MAX_PENDING, max_fds=3)

    # -- life ------------------------------------------------------------------------------

    def start(self) -> None:
        # Not dumpable, and so neither is any child: no other process of the user (a client's
        # notebook) reads their environment or memory through /proc, or traces them; the
        # requests of every client pass through them. A new program (the template, a
        # launched kernel) is dumpable again.
        _not_dumpable()
        template = self.spawn_template()
        for name in _PRELOAD:
            try:
                importlib.import_module(name)
            except Exception as exc:  # an optional part missing: its commands import it late
                logger.info("not preloaded: %s (%s)", name, exc)
        try:
            self.warm()
        except Exception as exc:
            logger.info("not warmed: %s", exc)
        self.refresh_versions()
        self.adopt_template(template)
        path = Path(self.files.socket)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a stale socket: this server holds the lock
        self.listener = listen_private(str(path), 64)
        found = path.stat()
        self.socket_id = (found.st_dev, found.st_ino)
        Path(self.files.sessions).mkdir(mode=0o700, exist_ok=True)
        write_private(self.files.pid_file, f"{os.getpid()}\n")
        self.last_busy = time.monotonic()  # idle from now: starting took a while

    def spawn_template(self) -> Any:
        """Start the kernel template (not waited for); None when it cannot start."""
        from ..._kernels.sharing import server_template

        # In the minimal environment, never that of the client that started the server.
        template = server_template(Path(self.files.fork_lock))
        try:
            template.spawn()  # dies with this thread: the server's only one
        except Exception as exc:
            logger.warning("no kernel template: %s", exc)
            return None
        return template

    def adopt_template(self, template: Any) -> None:
        """Wait for ``template`` to be ready and make it the one the children fork from."""
        from ..._kernels.sharing import adopt

        if template is not None:
            try:
                template.wait_ready()
            except Exception as exc:
                logger.warning("no kernel template: %s", exc)
                template.close()
                template = None
        self.template = template
        adopt(template)

    def replace_dead_template(self) -> None:
        """A template that died (killed, out of memory) is replaced, between commands: the
        next commands fork from a new one instead of each child starting its own. The spare,
        forked with the dead one, is dropped. An environment's template that died is forgotten
        (the next run in that environment has one started again)."""
        for interpreter, template in list(self.environments.items()):
            if not template.running:
                logger.warning("the kernel template of %s is gone", interpreter)
                self.forget_environment(interpreter)
                self.drop_spare()
        if self.template is None or self.template.running:
            return
        logger.warning("the kernel template (pid %s) is gone: starting another", self.template.pid)
        with contextlib.suppress(Exception):
            self.template.close()
        self.drop_spare()
        self.adopt_template(self.spawn_template())

    def serve(self) -> None:
        assert self.listener is not None
        while not self.stopping:
            self.reap()
            if (
                not self.children
                and not self.arrivals.incoming
                and time.monotonic() - self.last_busy > self.idle
                and not select.select([self.listener], [], [], 0)[0]  # no client waiting
            ):
                logger.info("idle for %g s: stopping", self.idle)
                break
            if not self._socket_is_ours():
                logger.info("socket file gone: stopping")
                break
            self.replace_dead_template()
            if self.spare is None and not self.reports:
                # Between commands (none waiting, the last one's kernel known): the next
                # command's child, forked ahead.
                with contextlib.suppress(OSError):
                    if not select.select([self.listener], [], [], 0)[0]:
                        self.fork_spare()
            for late, message in self.arrivals.expire():
                self.handle(late, *message)
            starting = self.environment_sockets()
            ready, _, _ = select.select(
                [self.listener, *self.reports, *self.arrivals.incoming, *starting],
                [],
                [],
                self.arrivals.timeout(0.5),
            )
            for ready_socket in ready:
                if ready_socket in self.reports:
                    self.read_report(ready_socket)
                    continue
                if ready_socket in starting:
                    self.environment_ready(starting[ready_socket])
                    continue
                conn = ready_socket
                if ready_socket is self.listener:
                    try:
                        conn, _ = self.listener.accept()
                    except OSError:
                        continue
                    arrived = self.arrivals.add(conn)
                else:
                    arrived = self.arrivals.read(conn)
                if arrived is not None:
                    self.handle(conn, *arrived)

    def stop(self) -> None:
        self.stopping = True
        if self.listener is not None:
            self.listener.close()
        for channel in self.reports:
            channel.close()
        self.reports.clear()
        self.arrivals.close("the run server is stopping")
        if self.spare is not None:
            pid, channel = self.spare
            self.spare = None
            channel.close()  # the spare ends (stopping the kernel it started)
            self.children[pid] = "spare"
        with contextlib.suppress(OSError):
            if self._socket_is_ours():
                Path(self.files.socket).unlink()
        for pid in list(self.children):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while self.children and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.05)
        for pid in list(self.children):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
        if self.template is not None:
            self.template.close()
        for interpreter in [*self.environments, *self.environments_starting]:
            self.forget_environment(interpreter)
        with contextlib.suppress(OSError):
            pid_file = Path(self.files.pid_file)
            if pid_file.read_text().strip() == str(os.getpid()):
                pid_file.unlink()

    def _socket_is_ours(self) -> bool:
        try:
            found = Path(self.files.socket).stat()
        except OSError:
            return False
        return (found.st_dev, found.st_ino) == self.socket_id

    def reap(self) -> None:
        while self.children:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.spare is not None and pid == self.spare[0]:
                self.spare[1].close()
                self.spare = None
            if self.children.pop(pid, None) is not None:
                self.last_busy = time.monotonic()

    # -- requests --------------------------------------------------------------------------

    def handle(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        """Answer ``request`` (in one line when refused), then close ``conn`` and ``fds``;
        whatever happens, the server serves on."""
        op = request.get("op")
        try:
            conn.settimeout(wire.ANSWER_SECONDS)  # one that does not read loses its answer
            if op == "status":
                wire.send(conn, self.status())
            elif op == "stop":
                wire.send(conn, {"stopping": True, "pid": os.getpid()})
                self.stopping = True
            elif op == "command":
                self.fork_command(conn, request, fds)
            else:
                wire.send(conn, {"error": f"unknown request {str(op)[:40]!r}"})
        except (OSError, ValueError) as exc:
            wire.refuse(conn, exc)
        except Exception as exc:
            logger.exception("request %.40r failed", op)
            wire.refuse(conn, f"the run server failed on this request ({type(exc).__name__})")
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()

    def status(self) -> dict[str, Any]:
        from ... import __version__

        self.reap()  # a child that ended while the server waited in select: not served now
        return {
            "pid": os.getpid(),
            "version": __version__,
            "python": sys.executable,
            "socket": self.files.socket,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "idle_timeout": self.idle,
            "template_pid": None if self.template is None else self.template.pid,
            "environment_templates": {
                interpreter: template.pid for interpreter, template in self.environments.items()
            },
            "commands": len(self.children),
            "served": self.served,
            "sessions": open_sessions(self.files, set(self.children)),
        }

    def refresh_versions(self) -> bool:
        """Read the versions run records name again when a folder of ``sys.path`` changed (a
        package installed or upgraded since): the children inherit them already read. True
        when they were read again."""
        from ..._records.provenance import package_versions

        site = []
        own = Path(self.files.folder).resolve()
        for folder in sys.path:
            if folder and Path(folder).resolve() == own:
                continue  # where it runs (``python -m``): its own files come and go there
            with contextlib.suppress(OSError):
                site.append((folder, Path(folder).stat().st_mtime_ns))
        if site == self.site:
            return False
        self.site = site
        package_versions.cache_clear()
        package_versions()
        return True

    def fork_command(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        from .child import read_request

        if len(fds) != 3:
            raise ValueError("malformed command: needs three streams")
        asked = read_request(request)  # checked here, read again by the child
        if not asked.argv:
            raise ValueError("malformed command: argv is empty")
        fields = ("argv", "cwd", "env", "umask", "rlimits")
        if self.refresh_versions() and self.spare is not None:
            self.drop_spare()  # forked before the versions changed
        self.served += 1
        if not takes_kernel(asked.argv):
            self.fork_alone(conn, asked, fds)
            return
        if self.spare is None:
            self.fork_spare(inherited=[conn.fileno(), *fds])
        assert self.spare is not None
        conn.setblocking(True)  # for the child: the descriptor's flags are shared
        pid, channel = self.spare
        self.spare = None
        try:
            wire.send_with_fds(channel, {k: request[k] for k in fields}, [conn.fileno(), *fds])
        except OSError:
            channel.close()  # the spare died: reaped as any child
            raise
        self.children[pid] = asked.argv[0]
        self.reports[channel] = pid
        self.last_busy = time.monotonic()

    def fork_alone(self, conn: socket.socket, asked: Command, fds: list[int]) -> None:
        """Fork a child for a command that takes no kernel of the server's (``show``,
        ``runs``, ``jobs``...): the spare, and the kernel it started ahead for the next run,
        are kept for that run. The child inherits the client's connection and streams."""
        from .child import serve_command

        conn.setblocking(True)
        pid = os.fork()
        if pid == 0:
            try:
                assert self.listener is not None
                self.listener.close()
                if self.spare is not None:
                    self.spare[1].close()
                for channel in self.reports:
                    channel.close()
                self.arrivals.close()
                serve_command(conn, asked, fds, self.files, os.getppid(), self.command)
            finally:
                os._exit(70)
        self.children[pid] = asked.argv[0]
        self.last_busy = time.monotonic()

    def fork_spare(self, inherited: list[int] | None = None) -> None:
        """Fork the child of the next command (:func:`.child.serve_next`): it waits on a
        channel of its own for the command, with a kernel like the last run's started.
        ``inherited``: descriptors of the request being handled, closed in the child (a
        client's output stays open only as long as its command's child holds it)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            from .child import serve_next

            try:
                assert self.listener is not None
                self.listener.close()
                ours.close()
                for channel in self.reports:
                    channel.close()
                self.arrivals.close()
                for fd in inherited or []:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                serve_next(theirs, self.files, os.getppid(), self.command, self.last_kernel)
            finally:
                os._exit(70)
        theirs.close()
        self.spare = (pid, ours)

    def drop_spare(self) -> None:
        """End the spare child (closing its channel ends it); reaped as any child."""
        if self.spare is not None:
            pid, channel = self.spare
            self.spare = None
            channel.close()
            self.children[pid] = "spare"

    def read_report(self, channel: socket.socket) -> None:
        """A child tells the kernel its run took (or closed its channel)."""
        self.reports.pop(channel, None)
        try:
            report = wire.receive(channel, limit=wire.MAX_REQUEST_BYTES, seconds=5)
        except OSError:
            report = {}
        finally:
            channel.close()
        # A command that ran nothing (a session's step, say): the next is no run's repeat.
        kernel = report.get("kernel")
        self.last_kernel = kernel if isinstance(kernel, dict) else None
        if self.last_kernel is not None:
            self.want_environment(self.last_kernel)

    # -- templates of notebooks' own environments -----------------------------------------

    def want_environment(self, kernel: dict[str, Any]) -> None:
        """A run's kernel ran a notebook's own environment (its declared dependencies): start
        a template of that environment, which the next children fork from once it is ready
        (each child spawned one of its own, a second of CPU per run)."""
        from ..._kernels.options import is_own_interpreter
        from ..._kernels.sharing import environment_template

        choice = kernel.get("choice")
        if not isinstance(choice, dict) or choice.get("native") is not True:
            return
        interpreter = choice.get("interpreter")
        if not isinstance(interpreter, str) or is_own_interpreter(interpreter):
            return
        if interpreter in self.environments or interpreter in self.environments_starting:
            return
        if self.template is None or not Path(interpreter).is_absolute():
            return  # no template here at all (kernels cannot be forked)
        while len(self.environments) + len(self.environments_starting) >= MAX_ENVIRONMENTS:
            oldest = next(iter(self.environments or self.environments_starting))
            self.forget_environment(oldest)
        digest = hashlib.sha256(os.fsencode(interpreter)).hexdigest()[:16]
        template = environment_template(interpreter, Path(f"{self.files.fork_lock}-{digest}"))
        try:
            template.spawn()  # from the main thread, the server's only one
        except Exception as exc:
            logger.info("no template of %s: %s", interpreter, exc)
            return
        logger.info("starting a kernel template of %s", interpreter)
        self.environments_starting[interpreter] = template

    def environment_sockets(self) -> dict[Any, str]:
        """The sockets of the environments' templates still starting (readable once ready)."""
        sockets = {}
        for interpreter, template in self.environments_starting.items():
            sock = template.starting_socket()
            if sock is not None:
                sockets[sock] = interpreter
        return sockets

    def environment_ready(self, interpreter: str) -> None:
        """The template of ``interpreter`` said it is ready (or failed): the children forked
        from now on adopt it; the spare, forked before, is forked again."""
        from ..._kernels.sharing import adopt_environment

        template = self.environments_starting.pop(interpreter)
        try:
            template.wait_ready()  # its answer is there: this reads it
        except Exception as exc:
            logger.info("no template of %s: %s", interpreter, exc)
            template.close()
            return
        self.environments[interpreter] = template
        adopt_environment(interpreter, template)
        self.drop_spare()

    def forget_environment(self, interpreter: str) -> None:
        """Stop the template of ``interpreter`` (the children forked from now on spawn their
        own when they need one)."""
        from ..._kernels.sharing import adopt_environment

        template = self.environments.pop(interpreter, None)
        template = template or self.environments_starting.pop(interpreter, None)
        adopt_environment(interpreter, None)
        if template is not None:
            with contextlib.suppress(Exception):
                template.close()


def _not_dumpable() -> None:
    """``PR_SET_DUMPABLE`` 0 (Linux; elsewhere, or refused, a warning in the log)."""
    try:
        done = ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        done = False
    if not done:
        logger.warning("cannot make the server undumpable: /proc shows its environment")


def open_sessions(files: ServerFiles, alive: set[int]) -> list[dict[str, Any]]:
    """The sessions held by the server's children (each described by its host's file)."""
    found = []
    with contextlib.suppress(OSError):
        for info in sorted(Path(files.sessions).glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                entry = json.loads(info.read_text())
                if entry.get("pid") in alive:
                    found.append(entry)
    return found


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def main(command: CommandMain, warm: Callable[[], object]) -> int:
    """Serve until idle or stopped; ``command`` runs one command line in a child, ``warm``
    is called once at start (to import what the commands need)."""
    files = server_files()
    idle = float(os.environ.get(IDLE_ENV) or DEFAULT_IDLE_SECONDS)
    lock = os.open(files.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    if not _take_lock(lock, files):
        os.close(lock)
        return 0  # another server holds it, and serves or is still starting
    # A forked child shares the lock's open file description (O_CLOEXEC only helps at exec):
    # a child that outlived the server (a session's host, hung) kept the lock, and no server
    # could start again. Each child closes its copy at once (once: in a child's own children
    # the number may name another file by then).
    held = [lock]

    def let_go() -> None:
        if held:
            _close_quietly(held.pop())

    os.register_at_fork(after_in_child=let_go)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(message)s"
    )
    server = _Server(files, idle, command, warm)
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "stopping", True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        server.start()
        logger.info("serving on %s (pid %d)", files.socket, os.getpid())
        server.serve()
    finally:
        server.stop()
        let_go()  # the next server may start now, while this process ends
    return 0


def _take_lock(lock: int, files: ServerFiles) -> bool:
    """Whether this process took the server's lock. A server that stopped holds it until its
    process ends (ending takes a while: its interpreter's teardown, children it waits for):
    the command that started this one, right after a ``server stop``, would else run
    in-process. Waited for up to :data:`LOCK_WAIT_SECONDS`, unless a server listens."""
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            pass
        if time.monotonic() > deadline or _listening(files.socket):
            return False
        time.sleep(0.02)


def _listening(path: str) -> bool:
    """Whether a server answers on the socket at ``path``."""
    try:
        wire.connect(path).close()
    except OSError:
        return False
    return True
