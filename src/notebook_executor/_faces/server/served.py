"""What a process forked by the run server knows of it: that it serves a command, and whether
the server went away meanwhile.

The server forks one child per command (:mod:`.daemon`). The child runs the command line's
own code, in its client's folder and environment; :func:`executor_engine` gives the commands
that run notebooks their engine there: kernels forked from the server's template
(:mod:`notebook_executor._kernels.shared_template`), and a run that the server's end cuts short
recorded as ``interrupted``, naming the cell that was running.
"""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING, Any

from ..._errors import NotebookExecutorError
from ...engine import RunCancelled

if TYPE_CHECKING:
    from types import FrameType

    from ..._notebook import NotebookNode
    from ...engine import CellEnd, EngineKernel, RunJob
    from .paths import ServerFiles

__all__ = [
    "ServerStopped",
    "ServerUnavailableError",
    "executor_engine",
    "serving",
]

#: The server's files, in a child of the server (None elsewhere).
FILES: ServerFiles | None = None
#: Set once the server stopped or died under a child (its parent-death signal, or a stop).
GONE = threading.Event()
#: A session opened by this child, which it goes on to hold once its command is answered.
PENDING_SESSION: list[Any] = []


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


def serving() -> bool:
    """Whether this process is a child of the run server, serving a command."""
    return FILES is not None


def on_server_gone(signum: int, frame: FrameType | None) -> None:
    """SIGTERM in a child: the server stops, or died (parent-death signal)."""
    GONE.set()
    # Interrupt whatever the main thread waits on, as Ctrl-C would.
    signal.default_int_handler(signum, frame)


def executor_engine(options: dict[str, Any]) -> Any:
    """The engine for an executor opened with ``options`` by a served command (``options``'
    ``warm_kernels`` taken out: the engine takes it), or None outside the server."""
    if not serving():
        return None
    from ..._kernels.kernel_engine import KernelEngine

    class ServedEngine(KernelEngine):
        """The kernel engine, with a cell cut short by the server's end (or a kernel start)
        raising :class:`ServerStopped`."""

        def open(self, job: RunJob) -> EngineKernel:
            try:
                kernel = super().open(job)
            except KeyboardInterrupt:
                if GONE.is_set():
                    raise ServerStopped from None
                raise
            # A session's kernel keeps its checkpoints; its host answers the server's end.
            return kernel if job.checkpoints else _ServedKernel(kernel)

    return ServedEngine(warm_kernels=options.pop("warm_kernels", None) or 0)


class _ServedKernel:
    """A kernel whose cell, cut short by the server's end, raises :class:`ServerStopped`."""

    def __init__(self, kernel: EngineKernel) -> None:
        self._kernel = kernel
        self.info = kernel.info

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        try:
            return self._kernel.run_cell(nb, index, limit)
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
