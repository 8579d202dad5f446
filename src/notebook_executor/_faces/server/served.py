"""What a process forked by the run server knows of it: that it serves a command, and whether
the server went away meanwhile.

The server forks one child per command (:mod:`.daemon`). The child runs the command line's
own code, in its client's folder and environment. All it knows of the server is one
:class:`Serving`, made by :func:`begin` and read through :func:`current` (None in any other
process); the command line asks through the calls below it (:func:`serving`,
:func:`server_files`, :func:`take_detach`, :func:`hold_session`, :func:`server_gone`).

:func:`executor_engine` gives the commands that run notebooks their engine there: kernels
forked from the server's template (:mod:`notebook_executor._kernels.sharing`), and a run that
the server's end cuts short recorded as ``interrupted``, naming the cell that was running. The
engine's kernels stop once the client has its answer (:meth:`Serving.after_answer`): the
command's records, catalog rows and output are complete by then, and the child lets go of the
client's streams before it answers.

The server forks each child before its command comes (a spare, see :mod:`.daemon`); the spare
starts a kernel like the one of the run before (:meth:`Serving.speculate`), which the command's
run takes when its kernel is the same (same name, folder and whole environment: a loop of runs
in one shell), as a warm executor's run takes a warm kernel.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..._errors import NotebookExecutorError
from ...engine import RunCancelled, StateUnusable, SupportsState
from . import wire

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import FrameType

    from ..._notebook import NotebookNode
    from ...engine import CellEnd, EngineKernel, RunJob, SupportsCheckpoints
    from .paths import ServerFiles

__all__ = [
    "ServerStopped",
    "ServerUnavailableError",
    "Serving",
    "TemplateGone",
    "begin",
    "current",
    "executor_class",
    "executor_engine",
    "hold_session",
    "server_files",
    "server_gone",
    "serving",
    "take_detach",
]


class ServerUnavailableError(NotebookExecutorError):
    """The run server cannot be reached (or sessions were asked for without one)."""


class ServerStopped(RunCancelled):
    """The run server stopped during a run: the run is recorded as ``interrupted``, naming
    the cell that was running.

    A :class:`~notebook_executor.engine.RunCancelled`, so that the run's records are finished
    as a cancelled run's are; the command line then fails with :attr:`message` (exit status
    2).
    """

    kind = "interrupted"
    ename = "ServerStopped"
    message = "the run server stopped during the run; it is recorded as interrupted"
    exit_status = 2


class TemplateGone(ServerStopped):
    """The run server's kernel template died during a session's step (the session's kernel
    with it): the step is recorded as ``interrupted``, as :class:`ServerStopped` records it,
    and the session ends."""

    ename = "TemplateGone"
    message = "the run server's kernel template died during the step; it is recorded as interrupted"


@dataclass
class Serving:
    """What a child of the run server knows of the server and of the command it serves."""

    #: The server's files, and its process id.
    files: ServerFiles
    server_pid: int
    #: Set once the server stopped or died under the child (its parent-death signal, or a stop).
    gone: threading.Event = field(default_factory=threading.Event)
    #: Set once the child answered its client.
    answered: threading.Event = field(default_factory=threading.Event)
    #: Set once the child answered its client ahead of the command's end (a job).
    detached: threading.Event = field(default_factory=threading.Event)
    #: What the child puts off until its client has the answer: stopping the run's kernels.
    put_off: list[Callable[[], object]] = field(default_factory=list)
    #: The kernel of the child's first run (its choice, folder and environment), told to the
    #: server: its next child starts one like it before its command comes (:meth:`speculate`).
    ran_kernel: dict[str, Any] | None = None
    #: A command that may become a job (``--detach``): its command line, and what answers its
    #: client at once and lets go of it (set by the child for every command).
    detach: tuple[list[str], Callable[[], None]] | None = None
    #: A session opened by this child (its executor and the session), which it goes on to
    #: hold once its command is answered.
    session: tuple[Any, Any] | None = None
    #: The engine on which the child started a kernel before its command came.
    spare_engine: Any = None
    #: The channel on which the child tells the server :attr:`ran_kernel` (a spare's), until
    #: it has (:meth:`report_kernel`), and whether the command was given secrets.
    report_channel: Any = None
    given_secrets: bool = False

    def report_kernel(self) -> None:
        """Tell the server the kernel of this command's run (None for a run given secrets:
        their values stay in this process and its kernel), once: as soon as the run chose it,
        so that the server forks the next child, which starts a kernel like it, while this run
        goes on (a command straight after this one then finds its kernel started)."""
        channel, self.report_channel = self.report_channel, None
        if channel is None:
            return
        kernel = None if self.given_secrets else self.ran_kernel
        # A hint, never a reason for the run to fail: a server gone, a variable or folder
        # whose bytes are not UTF-8 (the wire's JSON cannot carry it) tell nothing.
        with contextlib.suppress(OSError, ValueError):
            channel.settimeout(5)
            wire.send(channel, {"kernel": kernel})
        channel.close()

    def on_server_gone(self, signum: int, frame: FrameType | None) -> None:
        """SIGTERM in a child: the server stops, or died (parent-death signal).

        Interrupts the main thread once, as Ctrl-C would; not when the server's end is already
        known (the run's kernel died with it first): the child is then finishing the run's
        records, which a second interruption would leave ``running``.
        """
        if self.gone.is_set():
            return
        self.gone.set()
        signal.default_int_handler(signum, frame)

    def server_gone(self) -> bool:
        """Whether the server has stopped or died (it is then no longer the child's parent,
        even before the parent-death signal is handled)."""
        return self.gone.is_set() or os.getppid() != self.server_pid

    def after_answer(self) -> None:
        """Once the client has its answer: do what was put off for it (:attr:`put_off`).

        A SIGTERM meanwhile (the server stops, or died) waits until that is done, so that the
        kernels still stop cleanly; it is then handled as always (:meth:`on_server_gone`).
        """
        self.answered.set()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            while self.put_off:
                with contextlib.suppress(Exception):
                    self.put_off.pop(0)()
        finally:
            with contextlib.suppress(KeyboardInterrupt):
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})

    def when_answered(self, close: Callable[[], object]) -> None:
        """Call ``close`` now if the client has its answer, else once it has it."""
        if self.answered.is_set():
            close()
        else:
            self.put_off.append(close)

    def speculate(self, kernel: dict[str, Any]) -> None:
        """In a child waiting for its command: start a kernel like the last run's (``kernel``,
        as :attr:`ran_kernel` holds it), on the engine the command's first executor will get.

        Its run takes it if its kernel matches exactly (name, folder, whole environment: see
        :meth:`KernelEngine.speculate
        <notebook_executor._kernels.kernel_engine.KernelEngine.speculate>`); else the engine
        stops it when it closes. The kernel comes from the server's template, as every kernel
        of a served command does.
        """
        from pathlib import Path

        from ...engine import KernelChoice

        engine = _served_engine_class()(self, warm_kernels=0)
        engine.speculate(KernelChoice(**kernel["choice"]), Path(kernel["cwd"]), kernel["env"])
        self.spare_engine = engine

    def drop_speculation(self) -> None:
        """Stop the kernel started for a command that did not take its engine."""
        engine, self.spare_engine = self.spare_engine, None
        if engine is not None:
            with contextlib.suppress(Exception):
                engine.close()


#: The one :class:`Serving` of this process (a child of the server), or None.
_SERVING: Serving | None = None


def begin(files: ServerFiles, server_pid: int) -> Serving:
    """This process serves the server of ``files`` (process ``server_pid``): its
    :class:`Serving`, made on the first call (a spare's is its command's)."""
    global _SERVING
    if _SERVING is None:
        _SERVING = Serving(files, server_pid)
    return _SERVING


def current() -> Serving | None:
    """What this process knows of the run server it serves, or None outside the server."""
    return _SERVING


def serving() -> bool:
    """Whether this process is a child of the run server, serving a command."""
    return _SERVING is not None


def server_files() -> ServerFiles:
    """The files of the server this process serves; :class:`ServerUnavailableError` outside
    the server (sessions live there)."""
    if _SERVING is None:
        raise ServerUnavailableError("sessions live in the run server (see --help)")
    return _SERVING.files


def server_gone() -> bool:
    """Whether the server this process serves has stopped or died (False outside it)."""
    return _SERVING is not None and _SERVING.server_gone()


def take_detach() -> tuple[ServerFiles, list[str], Callable[[], None]] | None:
    """For a command that becomes a job (``--detach``): the server's files, its command
    line, and what answers its client at once and lets go of it; None outside the server."""
    if _SERVING is None or _SERVING.detach is None:
        return None
    (argv, let_go), _SERVING.detach = _SERVING.detach, None
    return _SERVING.files, argv, let_go


def hold_session(executor: Any, session: Any) -> None:
    """Have this child hold ``session`` (opened by ``executor``) once its command is
    answered (:mod:`.session_host`)."""
    server_files()
    assert _SERVING is not None
    _SERVING.session = (executor, session)


def executor_engine(options: dict[str, Any]) -> Any:
    """The engine for an executor opened with ``options`` by a served command (``options``'
    ``warm_kernels`` taken out: the engine takes it), or None outside the server. The first
    one of a command is the engine its child started a kernel on before the command came
    (:meth:`Serving.speculate`), if any."""
    here = _SERVING
    if here is None:
        return None
    warm = options.pop("warm_kernels", None) or 0
    if here.spare_engine is not None and not warm:
        engine, here.spare_engine = here.spare_engine, None
        return engine
    return _served_engine_class()(here, warm_kernels=warm)


@functools.cache
def executor_class() -> Any:
    """The executor of a served command: closed once its client has the answer (its runs'
    records and catalog rows are written and committed by then; closing stops the kernels and
    lets go of the catalog, whose last close also checkpoints the database)."""
    from ..._executor import NotebookExecutor

    class ServedExecutor(NotebookExecutor):
        def close(self) -> None:
            here = _SERVING
            if here is None:
                super().close()
            else:
                here.when_answered(super().close)

    return ServedExecutor


@functools.cache
def _served_engine_class() -> Any:
    from ..._kernels.kernel_engine import KernelEngine

    class ServedEngine(KernelEngine):
        """The kernel engine, with a cell cut short by the server's end (or a kernel start)
        raising :class:`ServerStopped`."""

        def __init__(self, here: Serving, *, warm_kernels: int) -> None:
            super().__init__(warm_kernels=warm_kernels)
            self.here = here

        def open(self, job: RunJob) -> EngineKernel:
            here = self.here
            if here.ran_kernel is None and not job.checkpoints:
                here.ran_kernel = {
                    "choice": asdict(job.kernel),
                    "cwd": str(job.cwd),
                    "env": dict(job.env),
                }
                here.report_kernel()
            try:
                kernel = super().open(job)
            except KeyboardInterrupt:
                if here.gone.is_set():
                    raise ServerStopped from None
                raise
            if job.checkpoints:
                # A session's: its checkpoints kept, and the template it came from watched.
                from ..._kernels.sharing import adopted

                return _ServedSessionKernel(kernel, here, adopted())
            return _ServedKernel(kernel, here)

        def close(self) -> None:
            # The command's records and catalog rows are written, its output printed: its
            # client need not wait for the kernels to stop (a tenth of a second).
            self.here.when_answered(super().close)

    return ServedEngine


class _ServedKernel:
    """A kernel whose cell, cut short by the server's end, raises :class:`ServerStopped`."""

    def __init__(self, kernel: EngineKernel, here: Serving) -> None:
        self._kernel = kernel
        self._here = here
        self.info = kernel.info

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        try:
            end = self._kernel.run_cell(nb, index, limit)
            # A kernel forked from the server's template dies with the server, often before
            # the child's parent-death signal: the run was cut short by the server's end.
            if end.how == "dead" and self._here.server_gone():
                self._here.gone.set()
                raise ServerStopped
            return end
        except KeyboardInterrupt:
            if self._here.gone.is_set():
                raise ServerStopped from None
            raise

    def save_widgets(self, nb: NotebookNode) -> None:
        self._kernel.save_widgets(nb)

    def state(self, content: Mapping[str, Any]) -> dict[str, Any]:
        """Durable checkpoints, as the engine's kernel writes and reads them."""
        kernel = self._kernel
        if not isinstance(kernel, SupportsState):
            raise StateUnusable("this engine cannot write or read a stored state")
        return kernel.state(content)

    def stop(self) -> None:
        self._kernel.stop()

    def close(self, *, clean: bool) -> None:
        self._kernel.close(clean=clean)


class _ServedSessionKernel(_ServedKernel):
    """A session's kernel (its checkpoints kept): a cell cut short by the server's end, or by
    the death of the template it was forked from (``template``: the server's, or None),
    raises :class:`ServerStopped` or :class:`TemplateGone`."""

    def __init__(self, kernel: Any, here: Serving, template: Any) -> None:
        super().__init__(kernel, here)
        self._template = template
        self._checkpointed = cast("SupportsCheckpoints", kernel)

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        try:
            end = self._kernel.run_cell(nb, index, limit)
        except KeyboardInterrupt:
            if self._here.gone.is_set():
                raise self._stopped() from None
            raise
        if end.how == "dead" and (self._here.server_gone() or self._template_died()):
            self._here.gone.set()
            raise self._stopped()
        return end

    def _template_died(self) -> bool:
        return self._template is not None and bool(self._template.exited())

    def _stopped(self) -> ServerStopped:
        return TemplateGone() if self._template_died() else ServerStopped()

    def checkpoint_unsupported(self) -> str | None:
        return self._checkpointed.checkpoint_unsupported()

    def checkpoint(self, key: int) -> None:
        self._checkpointed.checkpoint(key)

    def restore(self, key: int) -> None:
        self._checkpointed.restore(key)

    def checkpoints(self) -> list[int]:
        return self._checkpointed.checkpoints()

    def lost(self) -> dict[int, str]:
        return self._checkpointed.lost()
