"""What a process forked by the run server knows of it: that it serves a command, and whether
the server went away meanwhile.

The server forks one child per command (:mod:`.daemon`). The child runs the command line's
own code, in its client's folder and environment; :func:`executor_engine` gives the commands
that run notebooks their engine there: kernels forked from the server's template
(:mod:`notebook_executor._kernels.shared_template`), and a run that the server's end cuts short
recorded as ``interrupted``, naming the cell that was running. The engine's kernels stop once
the client has its answer (:func:`after_answer`): the command's records, catalog rows and output
are complete by then, and the child lets go of the client's streams before it answers.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import TYPE_CHECKING, Any

from ..._errors import NotebookExecutorError

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from ...engine import EngineOutcome, RunJob
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
#: What the child puts off until its client has the answer: stopping the run's kernels.
AFTER_ANSWER: list[Callable[[], object]] = []
#: Set once the child answered its client.
ANSWERED = threading.Event()


class ServerUnavailableError(NotebookExecutorError):
    """The run server cannot be reached (or sessions were asked for without one)."""


class ServerStopped(KeyboardInterrupt):
    """The run server stopped during a run: the run is recorded as ``interrupted``.

    A ``KeyboardInterrupt`` with an ``outcome``, so that the run's records are finished as a
    cancelled run's are; the command line then fails with :attr:`message` (exit status 2).
    """

    message = "the run server stopped during the run; it is recorded as interrupted"
    exit_status = 2

    def __init__(self, outcome: EngineOutcome) -> None:
        super().__init__(self.message)
        self.outcome = outcome


def serving() -> bool:
    """Whether this process is a child of the run server, serving a command."""
    return FILES is not None


def on_server_gone(signum: int, frame: FrameType | None) -> None:
    """SIGTERM in a child: the server stops, or died (parent-death signal)."""
    GONE.set()
    # Interrupt whatever the main thread waits on, as Ctrl-C would.
    signal.default_int_handler(signum, frame)


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
    ``warm_kernels`` taken out: the engine takes it), or None outside the server."""
    if not serving():
        return None
    from ..._kernels.kernel_engine import KernelEngine

    class ServedEngine(KernelEngine):
        """The kernel engine, with a run cut short by the server's end marked ``interrupted``."""

        def run(self, job: RunJob) -> EngineOutcome:
            from ...engine import CellFailure, RunCancelled

            try:
                outcome = super().run(job)
            except RunCancelled as exc:
                if not GONE.is_set():
                    raise
                outcome = exc.outcome
            if not GONE.is_set():
                return outcome
            from ..._run.runner import first_unfinished_cell

            failure = outcome.failure
            index = (
                failure.index
                if failure is not None
                else first_unfinished_cell(job.nb, outcome.completed)
            )
            outcome.failure = CellFailure(
                index, "interrupted", "ServerStopped", ServerStopped.message, []
            )
            raise ServerStopped(outcome)

        def close(self) -> None:
            # The command's records and catalog rows are written, its output printed: its
            # client need not wait for the kernels to stop (a tenth of a second).
            if ANSWERED.is_set():
                super().close()
            else:
                AFTER_ANSWER.append(super().close)

    return ServedEngine(warm_kernels=options.pop("warm_kernels", None) or 0)
