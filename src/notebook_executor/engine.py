"""The engine seam: what an engine is given, what it returns, and the protocol it follows.

An engine runs one notebook on one kernel. :class:`~notebook_executor.NotebookExecutor` uses the
real one (kernels forked or launched fresh for every run) unless it is handed another object
that follows :class:`Engine`; tests of everything around the engine do that, so they need no
kernel. Everything a custom engine needs is importable from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    import threading

    from nbformat import NotebookNode

__all__ = [
    "CellFailure",
    "Engine",
    "EngineOutcome",
    "ErrorKind",
    "KernelChoice",
    "RunCancelled",
    "RunJob",
]


@dataclass(frozen=True)
class KernelChoice:
    """The kernel a run will use."""

    name: str
    language: str
    #: True when the kernel is this interpreter's ipykernel rather than an installed kernelspec.
    native: bool


ErrorKind = Literal["cell_error", "timeout", "kernel_died", "cancelled", "interrupted"]


@dataclass
class RunJob:
    """Everything an engine needs to run one notebook.

    The engine executes ``nb`` in place: outputs and execution counts are written into
    its cells.
    """

    nb: NotebookNode
    kernel: KernelChoice
    cwd: Path
    env: dict[str, str]
    cell_timeout: float | None = None
    timeout: float | None = None
    #: Called with a code cell's index each time one completes (from the engine's thread);
    #: for progress display only: what it raises is logged and ignored.
    on_cell: Callable[[int], None] | None = None
    #: Set (from any thread) to cancel the run: the engine stops its kernel and raises
    #: :class:`RunCancelled`, as on Ctrl-C. An engine that does not honour it runs to the end.
    cancel: threading.Event | None = None


@dataclass
class CellFailure:
    """Why and where a run stopped."""

    index: int
    kind: ErrorKind
    ename: str
    evalue: str
    traceback: list[str]


@dataclass
class EngineOutcome:
    """What happened during a run; indices are positions in the job's notebook."""

    completed: list[int] = field(default_factory=list)
    failure: CellFailure | None = None
    cell_seconds: dict[int, float] = field(default_factory=dict)
    cell_started: dict[int, str] = field(default_factory=dict)
    kernel_seconds: float = 0.0


class RunCancelled(KeyboardInterrupt):
    """The caller interrupted a run; ``outcome`` says what ran before it stopped.

    An engine that is interrupted raises this (any ``KeyboardInterrupt`` with an ``outcome``
    attribute will do) so the run record keeps the cells that completed and names the one that
    was running.
    """

    def __init__(self, outcome: EngineOutcome) -> None:
        super().__init__("the run was cancelled")
        self.outcome = outcome


class Engine(Protocol):
    """Runs one job and reports what happened; never raises for a failure in the notebook.

    The one exception is Ctrl-C (or the job's ``cancel`` event): the engine stops its kernel and
    raises :class:`RunCancelled` carrying the partial outcome.
    """

    def run(self, job: RunJob) -> EngineOutcome:
        """Execute ``job.nb`` in place and return the outcome."""
        ...

    def close(self) -> None:
        """Release whatever the engine holds (kernels, processes)."""
        ...
