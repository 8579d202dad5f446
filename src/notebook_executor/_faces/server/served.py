"""What a process forked by the run server knows of it: that it serves a command, and whether
the server went away meanwhile.

The server forks one child per command (:mod:`.daemon`). The child runs the command line's
own code, in its client's folder and environment; :func:`executor_engine` gives the commands
that run notebooks their engine there: kernels forked from the server's template
(:mod:`notebook_executor._kernels.shared_template`), and a run that the server's end cuts short
recorded as ``interrupted``, naming the cell that was running. The engine's kernels stop once
the client has its answer (:func:`after_answer`): the command's records, catalog rows and output
are complete by then, and the child lets go of the client's streams before it answers.

The server forks each child before its command comes (a spare, see :mod:`.daemon`); the spare
starts a kernel like the one of the run before (:func:`speculate`), which the command's run
takes when its kernel is the same (same name, folder and whole environment: a loop of runs in
one shell), as a warm executor's run takes a warm kernel.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, cast

from ..._errors import NotebookExecutorError
from ...engine import RunCancelled

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from ..._notebook import NotebookNode
    from ...engine import CellEnd, EngineKernel, RunJob, SupportsCheckpoints
    from .paths import ServerFiles

__all__ = [
    "ServerStopped",
    "ServerUnavailableError",
    "TemplateGone",
    "after_answer",
    "drop_speculation",
    "executor_class",
    "executor_engine",
    "serving",
    "speculate",
]

#: The server's files, in a child of the server (None elsewhere).
FILES: ServerFiles | None = None
#: Set once the server stopped or died under a child (its parent-death signal, or a stop).
GONE = threading.Event()
#: The server's process id, in a child of the server (None elsewhere).
SERVER_PID: int | None = None
#: A session opened by this child, which it goes on to hold once its command is answered.
PENDING_SESSION: list[Any] = []
#: What the child puts off until its client has the answer: stopping the run's kernels.
AFTER_ANSWER: list[Callable[[], object]] = []
#: Set once the child answered its client.
ANSWERED = threading.Event()
#: The kernel of the child's first run (its choice, folder and environment), told to the
#: server: its next child starts one like it before its command comes (:func:`speculate`).
RAN_KERNEL: list[dict[str, Any]] = []
#: A command that may become a job (``--detach``): its command line, and what answers its
#: client at once and lets go of it (set by the child for every command).
DETACH: list[tuple[list[str], Callable[[], None]]] = []
#: Set once the child answered its client ahead of the command's end (a job).
DETACHED = threading.Event()
#: The engine on which a child started a kernel before its command came.
SPARE_ENGINE: list[Any] = []


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


def serving() -> bool:
    """Whether this process is a child of the run server, serving a command."""
    return FILES is not None


def on_server_gone(signum: int, frame: FrameType | None) -> None:
    """SIGTERM in a child: the server stops, or died (parent-death signal).

    Interrupts the main thread once, as Ctrl-C would; not when the server's end is already
    known (the run's kernel died with it first): the child is then finishing the run's
    records, which a second interruption would leave ``running``.
    """
    if GONE.is_set():
        return
    GONE.set()
    signal.default_int_handler(signum, frame)


def server_gone() -> bool:
    """Whether the server this child serves has stopped or died (it is then no longer the
    child's parent, even before the parent-death signal is handled)."""
    return GONE.is_set() or (SERVER_PID is not None and os.getppid() != SERVER_PID)


def after_answer() -> None:
    """Once the client has its answer: do what was put off for it (:data:`AFTER_ANSWER`).

    A SIGTERM meanwhile (the server stops, or died) waits until that is done, so that the
    kernels still stop cleanly; it is then handled as always (:func:`on_server_gone`).
    """
    ANSWERED.set()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        while AFTER_ANSWER:
            with contextlib.suppress(Exception):
                AFTER_ANSWER.pop(0)()
    finally:
        with contextlib.suppress(KeyboardInterrupt):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def executor_engine(options: dict[str, Any]) -> Any:
    """The engine for an executor opened with ``options`` by a served command (``options``'
    ``warm_kernels`` taken out: the engine takes it), or None outside the server. The first
    one of a command is the engine its child started a kernel on before the command came
    (:func:`speculate`), if any."""
    if not serving():
        return None
    warm = options.pop("warm_kernels", None) or 0
    if SPARE_ENGINE and not warm:
        return SPARE_ENGINE.pop()
    return _served_engine_class()(warm_kernels=warm)


def speculate(kernel: dict[str, Any]) -> None:
    """In a child waiting for its command: start a kernel like the last run's (``kernel``, as
    :data:`RAN_KERNEL` holds it), on the engine the command's first executor will get.

    Its run takes it if its kernel matches exactly (name, folder, whole environment: see
    :meth:`KernelPool.speculate <notebook_executor._kernels.pool.KernelPool.speculate>`); else
    the engine stops it when it closes. The kernel comes from the server's template, as every
    kernel of a served command does.
    """
    from pathlib import Path

    from ...engine import KernelChoice

    choice = KernelChoice(**kernel["choice"])
    cwd, env = Path(kernel["cwd"]), dict(kernel["env"])
    engine = _served_engine_class()(warm_kernels=0)
    loop, pool = engine._kernel_loop()

    async def start() -> None:
        pool.prepare()
        await pool.speculate(choice, cwd, env)

    loop.submit(start())
    SPARE_ENGINE.append(engine)


def drop_speculation() -> None:
    """Stop the kernel started for a command that did not take its engine."""
    while SPARE_ENGINE:
        with contextlib.suppress(Exception):
            SPARE_ENGINE.pop().close()


@functools.cache
def executor_class() -> Any:
    """The executor of a served command: closed once its client has the answer (its runs'
    records and catalog rows are written and committed by then; closing stops the kernels and
    lets go of the catalog, whose last close also checkpoints the database)."""
    from ..._executor import NotebookExecutor

    class ServedExecutor(NotebookExecutor):
        def close(self) -> None:
            if ANSWERED.is_set():
                super().close()
            else:
                AFTER_ANSWER.append(super().close)

    return ServedExecutor


@functools.cache
def _served_engine_class() -> Any:
    from ..._kernels.kernel_engine import KernelEngine

    class ServedEngine(KernelEngine):
        """The kernel engine, with a cell cut short by the server's end (or a kernel start)
        raising :class:`ServerStopped`."""

        def open(self, job: RunJob) -> EngineKernel:
            if not RAN_KERNEL and not job.checkpoints:
                RAN_KERNEL.append(
                    {"choice": asdict(job.kernel), "cwd": str(job.cwd), "env": dict(job.env)}
                )
            try:
                kernel = super().open(job)
            except KeyboardInterrupt:
                if GONE.is_set():
                    raise ServerStopped from None
                raise
            if job.checkpoints:
                # A session's: its checkpoints kept, and the template it came from watched.
                from ..._kernels.shared_template import adopted

                return _ServedSessionKernel(kernel, adopted())
            return _ServedKernel(kernel)

        def close(self) -> None:
            # The command's records and catalog rows are written, its output printed: its
            # client need not wait for the kernels to stop (a tenth of a second).
            if ANSWERED.is_set():
                super().close()
            else:
                AFTER_ANSWER.append(super().close)

    return ServedEngine


class _ServedKernel:
    """A kernel whose cell, cut short by the server's end, raises :class:`ServerStopped`."""

    def __init__(self, kernel: EngineKernel) -> None:
        self._kernel = kernel
        self.info = kernel.info

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        try:
            end = self._kernel.run_cell(nb, index, limit)
            # A kernel forked from the server's template dies with the server, often before
            # the child's parent-death signal: the run was cut short by the server's end.
            if end.how == "dead" and server_gone():
                GONE.set()
                raise ServerStopped
            return end
        except KeyboardInterrupt:
            if GONE.is_set():
                raise ServerStopped from None
            raise

    def save_widgets(self, nb: NotebookNode) -> None:
        self._kernel.save_widgets(nb)

    def stop(self) -> None:
        self._kernel.stop()

    def close(self, *, clean: bool) -> None:
        self._kernel.close(clean=clean)


class _ServedSessionKernel(_ServedKernel):
    """A session's kernel (its checkpoints kept): a cell cut short by the server's end, or by
    the death of the template it was forked from (``template``: the server's, or None),
    raises :class:`ServerStopped` or :class:`TemplateGone`."""

    def __init__(self, kernel: Any, template: Any) -> None:
        super().__init__(kernel)
        self._template = template
        self._checkpointed = cast("SupportsCheckpoints", kernel)

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        try:
            end = self._kernel.run_cell(nb, index, limit)
        except KeyboardInterrupt:
            if GONE.is_set():
                raise self._stopped() from None
            raise
        if end.how == "dead" and (server_gone() or self._template_died()):
            GONE.set()
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
