"""The kernel templates of ``pytest --notebooks`` under pytest-xdist: the controller's, lent.

Each worker is a pytest process of its own, which would start its own kernel templates (about a
second and a half of CPU in all: ipykernel, then pandas, pyarrow and scrapbook). With ``-n 2`` on
two CPUs, those starts were most of the run. Instead the controller, which runs no test, owns
the templates (:class:`~.._kernels.sharing.SharedForkServer`) and lends them: the one
that imports the kernel's modules starts as the controller is configured, while the workers
start; the one that preloads the data modules starts when a worker first asks for it (its pool
has run a notebook: see ``_kernels/pool.py``). A worker asks on the controller's Unix socket, in
a private folder (``0700``), and receives the template's control socket as ``SCM_RIGHTS``.
Every connection's peer is checked (``SO_PEERCRED``): a process of another user is refused,
whatever the folder's mode. The worker's kernel pools then fork from the templates
(:func:`~.._kernels.sharing.adopt`), taking turns with the other workers. A kernel forked
so is the same fresh kernel as any other: its own process, environment, working folder and
sockets.

Nothing is shared but the templates: each worker keeps its own warm kernels, and kills them when
it ends. When the controller ends, so do the templates, and every kernel forked from them; a
controller killed outright leaves its folder, which the next lender removes. A worker that is
lent no template (the controller could not start one, or is gone) starts its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._kernels.sharing import TEMPLATE_READY_TIMEOUT
from .._kernels.socket_paths import socket_base
from .server.wire import (
    WireError,
    check_peer,
    connect,
    receive,
    receive_with_fds,
    send,
    send_with_fds,
)

if TYPE_CHECKING:
    from .._kernels.sharing import SharedForkServer

__all__ = ["TemplateLender", "lent_templates"]

logger = logging.getLogger(__name__)

_SOCKET = "templates.sock"
#: The lender's folder: ``nbx-templates-<pid>-<random>``, private.
_PREFIX = "nbx-templates-"
#: The two kinds of template: the kernel's modules only, and the data modules too.
_KERNEL = "kernel"
_FULL = "full"
#: Longest request a worker sends (the kind it asks for), and the seconds it may take.
_MAX_REQUEST = 1024
_REQUEST_TIMEOUT = 10.0
#: Longest description of a template a worker reads (its environment's start-up variables and
#: the names of the modules it imported).
_MAX_DESCRIPTION = 1024 * 1024


class TemplateLender:
    """The controller's templates, and the socket that lends them. Make it from the thread that
    lives as long as the pytest session: the first template dies with that thread, the other
    with the thread that accepts connections, which lives as long as this.

    Raises
    ------
    OSError
        No private folder or socket could be made (workers then start their own templates).
    """

    def __init__(self, env: dict[str, str]) -> None:
        prefix = f"{_PREFIX}{os.getpid()}-"
        base = socket_base(tempfile.gettempdir(), f"{prefix}xxxxxxxx", len(_SOCKET) + 1)
        if base is None:
            raise OSError("no temporary folder short enough for a Unix socket")
        _sweep_stale(base)
        self.folder = tempfile.mkdtemp(prefix=prefix, dir=base)
        self.address = os.path.join(self.folder, _SOCKET)  # noqa: PTH118
        self._env = env
        #: Held while a template is spawned or the lender closes: none starts after close().
        self._lock = threading.Lock()
        self._closed = False
        self.templates: dict[str, SharedForkServer] = {}
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(self.address)
            self._listener.listen(16)
            self._spawn(_KERNEL)
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._serve, name="nbx-template-lender", daemon=True)
        self._thread.start()

    def _spawn(self, kind: str) -> SharedForkServer:
        """The template of ``kind``, spawned from this thread when it is not yet."""
        from .._kernels.sharing import SharedForkServer

        with self._lock:
            if self._closed:
                raise OSError("the lender is closed")
            template = self.templates.get(kind)
            if template is None:
                lock = Path(self.folder) / f"{kind}.lock"
                template = SharedForkServer(self._env, lock, data_modules=kind == _FULL)
                self.templates[kind] = template
                template.spawn()
            return template

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                check_peer(conn)
            except WireError as exc:  # another user's process: not a word
                logger.warning("template lender: %s", exc)
                conn.close()
                continue
            try:
                conn.settimeout(_REQUEST_TIMEOUT)
                kind = receive(conn, _MAX_REQUEST).get("template")
                if kind not in (_KERNEL, _FULL):
                    raise WireError(f"no template {kind!r} to lend")
                template = self._spawn(str(kind))  # from this thread: see the class
            except OSError as exc:  # WireError too; a template that failed to spawn
                logger.info("template lender: %s", exc)
                with contextlib.suppress(OSError):
                    send(conn, {"error": str(exc)})
                conn.close()
                continue
            # Answered once the template is ready, without holding up the next request.
            threading.Thread(target=_answer, args=(conn, template), daemon=True).start()

    def close(self) -> None:
        """Stop lending, and the templates (with every kernel forked from them); remove the
        folder this made."""
        with self._lock:
            self._closed = True
            templates = list(self.templates.values())
            self.templates.clear()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._listener.close()
        for template in templates:
            template.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _sweep_stale(base: str) -> None:
    """Remove the folders that lenders killed outright (SIGKILL, SIGTERM) left in ``base``:
    named by a process that is gone, this user's, holding only what a lender makes there."""
    made = {_SOCKET, f"{_KERNEL}.lock", f"{_FULL}.lock"}
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(_PREFIX) :].partition("-")[0]
        if not entry.name.startswith(_PREFIX) or not pid.isdigit():
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid() or not entry.is_dir(
                follow_symlinks=False
            ):
                continue
            os.kill(int(pid), 0)
            continue  # its lender runs
        except ProcessLookupError:
            pass
        except OSError:
            continue
        try:
            if {path.name for path in Path(entry.path).iterdir()} <= made:
                shutil.rmtree(entry.path)
        except OSError:
            continue


def _answer(conn: socket.socket, template: SharedForkServer) -> None:
    """Send ``template``'s description and control socket once it is ready, or why not."""
    from .._kernels.sharing import ForkServerError

    with conn:
        try:
            description, fd = template.handle()
            send_with_fds(conn, {"template": description}, [fd])
        except (OSError, ForkServerError) as exc:
            with contextlib.suppress(OSError):
                send(conn, {"error": str(exc)})


class _Fetch:
    """Fetches the template of one kind from the controller, for a worker's lent copy."""

    def __init__(self, address: str, kind: str) -> None:
        self.address = address
        self.kind = kind
        self._sock: Any = None
        self._cancelled = False

    def __call__(self) -> tuple[dict[str, Any], socket.socket]:
        sock = connect(self.address)
        self._sock = sock
        fds: list[int] = []
        try:
            if self._cancelled:
                raise WireError("cancelled")
            sock.settimeout(TEMPLATE_READY_TIMEOUT + _REQUEST_TIMEOUT)
            check_peer(sock)
            send(sock, {"template": self.kind})
            message, fds = receive_with_fds(sock, _MAX_DESCRIPTION, max_fds=1)
            description = message.get("template")
            if not isinstance(description, dict) or len(fds) != 1:
                raise WireError(str(message.get("error", "no template in the answer")))
            return description, socket.socket(fileno=fds.pop())
        finally:
            for fd in fds:
                os.close(fd)
            self._sock = None
            sock.close()

    def cancel(self) -> None:
        self._cancelled = True
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def lent_templates(address: str) -> tuple[SharedForkServer, SharedForkServer]:
    """This worker's copies of the two templates lent at ``address`` (the kernel's, then the
    one with the data modules), each fetched when first waited for."""
    from .._kernels.sharing import SharedForkServer

    copies = []
    for kind in (_KERNEL, _FULL):
        fetch = _Fetch(address, kind)
        copies.append(SharedForkServer.lent(fetch, fetch.cancel, data_modules=kind == _FULL))
    return copies[0], copies[1]
