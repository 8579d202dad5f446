"""The engine seam: what an engine is given, what it returns, and the protocol it follows.

An engine runs one notebook on one kernel. :class:`~notebook_executor.NotebookExecutor` uses the
real one (kernels forked or launched fresh for every run) unless it is handed another object
that follows :class:`Engine`; tests of everything around the engine do that, so they need no
kernel. Everything a custom engine needs is importable from here.

A custom engine is any object with the two methods of :class:`Engine`::

    class EchoEngine:
        def run(self, job: RunJob) -> EngineOutcome:
            outcome = EngineOutcome()
            for index, cell in enumerate(job.nb.cells):
                if cell.cell_type == "code":
                    cell.outputs = []  # ... execute the cell, fill its outputs ...
                    outcome.completed.append(index)
                    job.cell_done(index)
            return outcome

        def close(self) -> None:
            pass

It may also have either optional hook, :meth:`~SupportsPrepare.prepare_kernel` and
:meth:`~SupportsPrestart.prestart`, to start work early; the executor calls a hook only when the
engine has it.

:class:`ScriptedEngine` runs no code at all: a function gives each code cell's outputs, as
httpx's ``MockTransport`` answers requests, so that what surrounds the engine (parameters, the
result, the run files, a face) can be tested without a kernel.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from ._notebook import NotebookNode
from ._types import ErrorKind

if TYPE_CHECKING:
    import threading

__all__ = [
    "CellFailure",
    "CellReply",
    "Engine",
    "EngineOutcome",
    "ErrorKind",
    "KernelChoice",
    "NotebookNode",
    "RunCancelled",
    "RunJob",
    "ScriptedEngine",
    "SupportsPrepare",
    "SupportsPrestart",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KernelChoice:
    """The kernel a run will use."""

    name: str
    language: str
    #: True when the kernel is this interpreter's ipykernel rather than an installed kernelspec.
    native: bool
    #: The program the kernel runs (``sys.executable`` for the native kernel, else the first
    #: word of the kernelspec's command), as given, not resolved: a venv's python stays one.
    interpreter: str | None = None


@dataclass
class RunJob:
    """Everything an engine needs to run one notebook.

    The engine executes ``nb`` in place: outputs and execution counts are written into
    its cells.

    ``nb`` is an nbformat 4 notebook as a :class:`NotebookNode`: nbformat's interface (a dict
    whose keys also read as attributes, ``job.nb.cells[0].source``; a dict stored in it
    becomes a node), built without importing nbformat (which costs about 0.8 s next to
    JupyterLab). It is a twin of ``nbformat.NotebookNode``, not an instance of it: code that
    needs nbformat's own object calls ``nbformat.from_dict(job.nb)``.
    """

    nb: NotebookNode
    kernel: KernelChoice
    cwd: Path
    env: dict[str, str]
    cell_timeout: float | None = None
    timeout: float | None = None
    #: Called with a code cell's index each time one completes (from the engine's thread);
    #: for progress display only. Engines call :meth:`cell_done`, not this.
    on_cell: Callable[[int], None] | None = None
    #: Set (from any thread) to cancel the run: the engine stops its kernel and raises
    #: :class:`RunCancelled`, as on Ctrl-C. An engine that does not honour it runs to the end.
    cancel: threading.Event | None = None
    #: Called with a code cell's index and each output (an nbformat output dict: ``stream``,
    #: ``execute_result``, ``display_data`` or ``error``) as it arrives from the kernel, from
    #: the engine's thread; for live display only (``--log-output``): what it raises is
    #: logged and ignored. Streamed text arrives piece by piece, as the kernel sends it.
    on_output: Callable[[int, Mapping[str, Any]], None] | None = None
    #: Called with a code cell's index just before the engine runs it, from the engine's
    #: thread (papermill's engine marks the cell running there); engines call
    #: :meth:`cell_starting`, not this.
    on_cell_start: Callable[[int], None] | None = None
    #: Longest the kernel may take to start and answer (seconds); None: the engine's own limit.
    start_timeout: float | None = None

    def cell_starting(self, index: int) -> None:
        """Report that the code cell at ``index`` is about to run; never fails the run."""
        if self.on_cell_start is None:
            return
        try:
            self.on_cell_start(index)
        except Exception as exc:
            logger.debug("the cell start callback failed: %s", exc)

    def cell_done(self, index: int) -> None:
        """Report that the code cell at ``index`` completed; never fails the run.

        An engine calls this after each cell it completes, so that progress shows. What the
        caller's ``on_cell`` raises is logged and ignored.
        """
        if self.on_cell is None:
            return
        try:
            self.on_cell(index)
        except Exception as exc:
            logger.debug("the cell progress callback failed: %s", exc)


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
    #: The cell that ended the run early and successfully (``sys.exit()``, ``sys.exit(0)``,
    #: ``raise SystemExit``), if one did; the cells after it did not run.
    exited: int | None = None
    #: Cells whose output was lost in part (the engine marks the place in the cell's outputs).
    output_lost: list[int] = field(default_factory=list)


class RunCancelled(KeyboardInterrupt):
    """The caller interrupted a run; ``outcome`` says what ran before it stopped.

    An engine that is interrupted raises this (any ``KeyboardInterrupt`` with an ``outcome``
    attribute will do) so the run record keeps the cells that completed and names the one that
    was running. When :meth:`~notebook_executor.NotebookExecutor.execute` raises it again, the
    run is recorded and the exception's ``result`` attribute is the cancelled run's result dict
    (``error_kind`` ``"cancelled"``).
    """

    def __init__(self, outcome: EngineOutcome) -> None:
        super().__init__("the run was cancelled")
        self.outcome = outcome


class Engine(Protocol):
    """Runs one job and reports what happened; never raises for a failure in the notebook.

    The one exception is Ctrl-C (or the job's ``cancel`` event): the engine stops its kernel
    and raises :class:`RunCancelled` carrying the partial outcome. ``run`` may be called from
    several threads at once (:meth:`~notebook_executor.NotebookExecutor.execute_many`).

    Two hooks are optional, each a protocol of its own so that an engine has either, both or
    neither: :class:`SupportsPrepare` (a head start before any run is known) and
    :class:`SupportsPrestart` (start a checked job's kernel while its run records are written).
    """

    def run(self, job: RunJob) -> EngineOutcome:
        """Execute ``job.nb`` in place and return the outcome."""
        ...

    def close(self) -> None:
        """Release whatever the engine holds (kernels, processes)."""
        ...


@runtime_checkable
class SupportsPrepare(Protocol):
    """An engine that can get ready for a run before the run is known."""

    def prepare_kernel(self) -> None:
        """Start what the first run will need, knowing nothing of it; return at once.

        Called by :meth:`NotebookExecutor.prepare_kernel
        <notebook_executor.NotebookExecutor.prepare_kernel>`, which the command line calls
        before it reads and checks the notebook. No kernel may start here (bad input must start
        none): the default engine starts a template process that imports ipykernel, and forks
        the first kernel from it once a run asks for one.
        """
        ...


@runtime_checkable
class SupportsPrestart(Protocol):
    """An engine that can start a job's kernel before :meth:`Engine.run` asks for it."""

    def prestart(self, job: RunJob) -> None:
        """Start the kernel ``job`` will run on; return at once.

        Called with a job that passed every input check, before its run records are written
        and :meth:`Engine.run` is called with the same job; ``run`` then uses that kernel.
        ``execute`` calls it just before the run records; ``execute_many`` calls it for every
        run once all the parameter sets are checked, before the first run starts, so an
        engine knows a sweep is coming. A job announced this way may still never run (Ctrl-C).
        """
        ...


#: What a :class:`ScriptedEngine`'s handler gives for one code cell: its outputs (nbformat
#: output dicts), or the failure that ends the run there.
CellReply: TypeAlias = "Iterable[Mapping[str, Any]] | CellFailure"


class ScriptedEngine:
    """An engine that runs no code: ``handler(job, index)`` gives each code cell's outputs.

    The cells of ``job.nb`` are taken in order, as the kernel engine takes them: markdown and
    raw cells and cells tagged ``skip-execution`` are passed over, a blank code cell completes
    without running; every other code cell gets the next execution count (from 1) and the
    outputs the handler returns. An ``error`` output among them fails the run there with a
    ``cell_error`` (a ``SystemExit`` with no status or 0 ends it early and successfully, as
    ``sys.exit()`` does on a kernel). The handler may instead return a :class:`CellFailure` (a
    ``timeout`` or a ``kernel_died``, say), which ends the run at that cell; a failure of kind
    ``cancelled``, or the job's ``cancel`` event set before a cell, raises
    :class:`RunCancelled`, as Ctrl-C does. Outputs the handler appends to the cell itself
    stay before those it returns (what a kernel sent before it timed out or died, say). Each
    cell's time is the handler's. Every job is kept in :attr:`jobs`.

    Parameters
    ----------
    handler : callable, optional
        ``handler(job, index) -> outputs or CellFailure``; by default each cell produces no
        output.

    Examples
    --------
    >>> from notebook_executor.engine import ScriptedEngine
    >>> def handler(job, index):
    ...     source = job.nb.cells[index].source
    ...     if "1 / 0" in source:
    ...         return [{"output_type": "error", "ename": "ZeroDivisionError",
    ...                  "evalue": "division by zero", "traceback": []}]
    ...     return [{"output_type": "stream", "name": "stdout", "text": "ran\\n"}]
    >>> engine = ScriptedEngine(handler)  # NotebookExecutor(engine=engine) runs on it
    """

    def __init__(self, handler: Callable[[RunJob, int], CellReply] | None = None) -> None:
        self.handler = handler
        #: Every job run, in order.
        self.jobs: list[RunJob] = []
        #: How many times :meth:`close` was called.
        self.closed = 0

    def run(self, job: RunJob) -> EngineOutcome:
        """Give each code cell of ``job.nb`` its scripted outputs; see the class."""
        from ._notebook import from_dict
        from ._times import iso, now_utc

        self.jobs.append(job)
        outcome = EngineOutcome()
        count = 0
        for index, cell in enumerate(job.nb.cells):
            tags = cell.get("metadata", {}).get("tags", [])
            if cell.get("cell_type") != "code" or "skip-execution" in tags:
                continue
            if job.cancel is not None and job.cancel.is_set():
                outcome.failure = CellFailure(
                    index, "cancelled", "KeyboardInterrupt", "the run was cancelled", []
                )
                raise RunCancelled(outcome)
            job.cell_starting(index)
            outcome.cell_started[index] = iso(now_utc())
            began = time.monotonic()
            if str(cell.get("source", "")).strip():
                count += 1
                cell["execution_count"] = count
                cell["outputs"] = []
                reply = () if self.handler is None else self.handler(job, index)
                outcome.cell_seconds[index] = round(time.monotonic() - began, 6)
                if isinstance(reply, CellFailure):
                    outcome.failure = reply
                    if reply.kind == "cancelled":
                        raise RunCancelled(outcome)
                    return outcome
                for output in reply:
                    node = from_dict(dict(output))
                    cell["outputs"].append(node)
                    self._report(job, index, node)
                errors = [o for o in cell["outputs"] if o.get("output_type") == "error"]
                if errors and not _clean_exit(errors):
                    last = errors[-1]
                    outcome.failure = CellFailure(
                        index,
                        "cell_error",
                        str(last.get("ename", "")),
                        str(last.get("evalue", "")),
                        [str(line) for line in last.get("traceback", [])],
                    )
                    return outcome
                if errors:
                    outcome.exited = index
            else:
                outcome.cell_seconds[index] = 0.0
            outcome.completed.append(index)
            job.cell_done(index)
            if outcome.exited is not None:
                break
        return outcome

    def close(self) -> None:
        """Nothing to release; counts the calls."""
        self.closed += 1

    @staticmethod
    def _report(job: RunJob, index: int, output: Mapping[str, Any]) -> None:
        if job.on_output is None:
            return
        try:
            job.on_output(index, output)
        except Exception as exc:
            logger.debug("the output callback failed: %s", exc)


def _clean_exit(errors: list[Mapping[str, Any]]) -> bool:
    """Whether every error is a ``SystemExit`` with no status or 0 (``sys.exit()``)."""
    return all(
        e.get("ename") == "SystemExit" and str(e.get("evalue", "")) in ("", "0") for e in errors
    )
