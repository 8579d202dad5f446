"""The engine seam: what an engine is given, what it returns, and the protocol it follows.

An engine opens kernels; the executor drives them. For a run, :func:`open <Engine.open>` gives
a kernel for the job and the executor's one cell loop runs the job's code cells on it, one at a
time (:meth:`EngineKernel.run_cell`), owning everything around the cells: which cells run, the
time limits, how a cell's end becomes the run's failure, the "output lost" marker, Ctrl-C, the
widgets' state. A session's steps go through the same loop, on a kernel opened for a job that
asks for checkpoints (:attr:`RunJob.checkpoints`): an engine whose kernels follow
:class:`SupportsCheckpoints` gives time travel, any other still serves sessions (a restore then
replays the cells on a fresh kernel).

:class:`~notebook_executor.NotebookExecutor` uses the real engine (kernels forked or launched
fresh for every run) unless it is handed another object that follows :class:`Engine`; tests of
everything around the engine do that, so they need no kernel. Everything a custom engine needs
is importable from here. A custom engine::

    class EchoEngine:
        def open(self, job: RunJob) -> EngineKernel:
            return EchoKernel()

        def close(self) -> None:
            pass

    class EchoKernel:
        info = {}

        def run_cell(self, nb, index, limit):
            nb.cells[index].outputs = []  # ... execute the cell, fill its outputs ...
            return CellEnd("ok")

        def save_widgets(self, nb): pass
        def stop(self): pass
        def close(self, *, clean): pass

An engine may also have either optional hook, :meth:`~SupportsPrepare.prepare_kernel` and
:meth:`~SupportsPrestart.prestart`, to start work early; the executor calls a hook only when the
engine has it.

:class:`ScriptedEngine` runs no code at all: a function gives each code cell's outputs, as
httpx's ``MockTransport`` answers requests, so that what surrounds the engine (parameters, the
result, the run files, sessions, a face) can be tested without a kernel.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from ._notebook import NotebookNode
from ._types import ErrorKind

if TYPE_CHECKING:
    import threading

__all__ = [
    "CellEnd",
    "CellFailure",
    "CellHooks",
    "CellOutput",
    "CellRan",
    "CellReply",
    "CellStart",
    "CheckpointError",
    "Engine",
    "EngineKernel",
    "EngineOutcome",
    "ErrorKind",
    "KernelChoice",
    "NotebookNode",
    "RunCancelled",
    "RunJob",
    "ScriptedEngine",
    "StateKeeper",
    "StateUnusable",
    "SupportsCheckpoints",
    "SupportsLookahead",
    "SupportsPrepare",
    "SupportsPrestart",
    "SupportsState",
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


@dataclass(frozen=True)
class CellStart:
    """A code cell about to run: what :attr:`CellHooks.on_cell_start` is told."""

    index: int
    #: When it started (ISO-8601, UTC).
    started: str


@dataclass(frozen=True)
class CellOutput:
    """One output of a running code cell, as it arrives from the kernel: what
    :attr:`CellHooks.on_output` is told. ``output`` is an nbformat output dict (``stream``,
    ``execute_result``, ``display_data`` or ``error``); streamed text arrives piece by piece,
    as the kernel sends it."""

    index: int
    output: Mapping[str, Any]


@dataclass(frozen=True)
class CellRan:
    """A code cell that ran, completed or not: what :attr:`CellHooks.on_cell_executed` is
    told (a cell the run was cancelled in included)."""

    index: int
    #: When it started (ISO-8601, UTC).
    started: str
    seconds: float
    #: How it failed; None: it completed.
    failure: CellFailure | None
    #: It ended with ``sys.exit()`` (or 0): completed, and the run ends there.
    exited: bool
    #: The next cell was sent to the kernel as this one completed
    #: (:class:`SupportsLookahead`): the kernel may be running it, so nothing may act on the
    #: kernel's state (a checkpoint would hold part of the next cell).
    next_sent: bool = False

    @property
    def completed(self) -> bool:
        return self.failure is None


@dataclass
class CellHooks:
    """The observers of a job's code cells, as nbclient's ``on_cell_start`` and
    ``on_cell_executed``: each a list of callables, called in order with a typed context.

    The executor's cell loop calls ``on_cell_start`` before each code cell it runs and
    ``on_cell_executed`` after it, whether it completed or failed; the engine's kernel calls
    ``on_output`` (through :meth:`output_hook`) with each output as it arrives. All are called
    from the thread that runs the job. Progress, live output, papermill's cell states and a
    session's record and checkpoints subscribe here. An observer must not fail the run: what
    one raises (an ``Exception``) is logged and ignored.
    """

    on_cell_start: list[Callable[[CellStart], None]] = field(default_factory=list)
    on_output: list[Callable[[CellOutput], None]] = field(default_factory=list)
    on_cell_executed: list[Callable[[CellRan], None]] = field(default_factory=list)

    def cell_started(self, event: CellStart) -> None:
        """Tell every ``on_cell_start`` observer."""
        _tell(self.on_cell_start, event)

    def cell_executed(self, event: CellRan) -> None:
        """Tell every ``on_cell_executed`` observer."""
        _tell(self.on_cell_executed, event)

    def output_hook(self) -> Callable[[int, Mapping[str, Any]], None] | None:
        """What an engine calls with ``(index, output)`` for each output of a cell, telling
        every ``on_output`` observer; None when there is none (the engine may then skip the
        call)."""
        if not self.on_output:
            return None
        observers = self.on_output

        def output(index: int, output: Mapping[str, Any]) -> None:
            _tell(observers, CellOutput(index, output))

        return output

    @contextlib.contextmanager
    def observing(
        self,
        *,
        on_cell_start: Callable[[CellStart], None] | None = None,
        on_output: Callable[[CellOutput], None] | None = None,
        on_cell_executed: Callable[[CellRan], None] | None = None,
    ) -> Iterator[CellHooks]:
        """Subscribe the observers given for the ``with`` block only."""
        added = [
            (observers, observer)
            for observers, observer in (
                (self.on_cell_start, on_cell_start),
                (self.on_output, on_output),
                (self.on_cell_executed, on_cell_executed),
            )
            if observer is not None
        ]
        for observers, observer in added:
            observers.append(observer)  # type: ignore[arg-type]
        try:
            yield self
        finally:
            for observers, observer in added:
                observers.remove(observer)  # type: ignore[arg-type]


def _tell(observers: list[Callable[[Any], None]], event: object) -> None:
    for observer in observers:
        try:
            observer(event)
        except Exception as exc:
            logger.debug("a cell observer failed: %s", exc)


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
    #: Set (from any thread) to cancel the run: the cell loop stops the kernel and raises
    #: :class:`RunCancelled`, as on Ctrl-C. An engine ends its waits when it is set (a
    #: kernel's start, a cell's reply); one that does not is stopped after its wait.
    cancel: threading.Event | None = None
    #: Longest the kernel may take to start and answer (seconds). The cell loop sets it before
    #: :meth:`Engine.open`: the caller's (None: :attr:`Timeouts.kernel_start
    #: <notebook_executor._types.Timeouts.kernel_start>`, 60 s), or what is left of the run's
    #: ``timeout`` when that is less. An engine gives up starting after it.
    start_timeout: float | None = None
    #: True for a session's kernel: checkpoints will be asked for (an engine that cannot take
    #: them opens its usual kernel). ``checkpoint_memory``: most bytes they may hold.
    checkpoints: bool = False
    checkpoint_memory: int | None = None
    #: Who is told of each code cell: its start, its outputs, its end (:class:`CellHooks`).
    hooks: CellHooks = field(default_factory=CellHooks)
    #: Durable checkpoints (docs/how-to/incremental.md): what restores a stored state before
    #: the first cell, and writes states after cells; None: neither.
    state: StateKeeper | None = None


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
    #: Files the notebook opened, by absolute path: ``"r"``, ``"w"`` or ``"rw"`` (the kernel's
    #: audit hook reports them with its execute replies: ``_records/files.py``).
    files: dict[str, str] = field(default_factory=dict)
    #: Cells whose state and outputs came from an earlier run's checkpoint, and that run.
    reused: list[int] = field(default_factory=list)
    reused_from: str | None = None
    #: What the checkpoints did and did not do, in words (why a stored state was not used).
    state_notes: list[str] = field(default_factory=list)


class RunCancelled(KeyboardInterrupt):
    """The caller interrupted a run; ``outcome`` says what ran before it stopped.

    An engine that is interrupted raises this (any ``KeyboardInterrupt`` with an ``outcome``
    attribute will do) so the run record keeps the cells that completed and names the one that
    was running. When :meth:`~notebook_executor.NotebookExecutor.execute` raises it again, the
    run is recorded and the exception's ``result`` attribute is the cancelled run's result dict
    (``error_kind`` ``"cancelled"``).
    """

    #: How the cell that was running is recorded (a subclass may say otherwise: the run
    #: server's end records ``interrupted``).
    kind: ErrorKind = "cancelled"
    ename = "KeyboardInterrupt"
    message = "the run was cancelled"

    def __init__(self, outcome: EngineOutcome | None = None) -> None:
        super().__init__(self.message)
        self.outcome = EngineOutcome() if outcome is None else outcome


@dataclass
class CellEnd:
    """How one cell's execution ended, as :meth:`EngineKernel.run_cell` tells it.

    ``how`` is ``"ok"`` (the reply said ok), ``"error"`` (the reply said error: the cell's
    outputs hold the traceback), ``"timeout"`` (no reply within the limit), ``"dead"`` (the
    kernel died before replying) or ``"cancelled"`` (the run was cancelled while it waited).
    ``idle`` tells whether the kernel's idle status for the cell arrived, i.e. whether its
    output is known to be whole. For a dead kernel, ``exit_status`` (when known) and
    ``stderr`` (its last lines) say how it died.
    """

    how: Literal["ok", "error", "timeout", "dead", "cancelled"]
    reply: Mapping[str, Any] = field(default_factory=dict)
    idle: bool = False
    exit_status: int | None = None
    stderr: list[str] = field(default_factory=list)
    #: How the cell failed, when the engine knows it exactly (a :class:`ScriptedEngine`'s
    #: handler says so): taken as it is, instead of what the loop makes of ``how``.
    failure: CellFailure | None = None
    #: The next cell was sent as this one completed (:meth:`SupportsLookahead.run_cell_then`).
    next_sent: bool = False


class CheckpointError(RuntimeError):
    """A checkpoint could not be taken or restored (or is not held); the message says why."""


class EngineKernel(Protocol):
    """A kernel an engine opened for one job (a run, or a session until it restarts it).

    The executor's cell loop calls :meth:`run_cell` for each code cell, from one thread at a
    time, and :meth:`close` once (after :meth:`stop` when the kernel is no longer usable).
    """

    @property
    def info(self) -> Mapping[str, Any]:
        """The kernel's ``kernel_info_reply`` content (``language_info`` and so on); may be
        empty."""
        ...

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        """Run code cell ``index`` of ``nb``: its execution count and outputs go into the cell
        as they arrive (each told to the job's observers with ``job.hooks.output_hook()``).
        Wait ``limit`` seconds at most for the reply (None: as long as the kernel lives; the
        loop computes it). Ctrl-C (``KeyboardInterrupt``) or the job's ``cancel`` event ends
        the wait: this raises ``KeyboardInterrupt`` (or returns ``CellEnd("cancelled")``), and
        the loop then stops the kernel."""
        ...

    def save_widgets(self, nb: NotebookNode) -> None:
        """Write the state of the kernel's widget models into ``nb``'s metadata (nothing when
        there are none)."""
        ...

    def stop(self) -> None:
        """Stop the kernel now: a cell timed out, the kernel died or the run was cancelled;
        its state is lost (checkpoints stay)."""
        ...

    def close(self, *, clean: bool) -> None:
        """Release the kernel and everything it holds; ``clean``: every cell it was asked to
        run ended (the kernel may be shut down politely)."""
        ...


@runtime_checkable
class SupportsCheckpoints(Protocol):
    """An :class:`EngineKernel` that keeps copies of its state, keyed by the index of the cell
    after which each was taken (``-1``: the fresh kernel)."""

    def checkpoint_unsupported(self) -> str | None:
        """Why no checkpoint can be taken of this kernel now, or None."""
        ...

    def checkpoint(self, key: int) -> None:
        """Save the current state as ``key`` (replacing it); raises :class:`CheckpointError`."""
        ...

    def restore(self, key: int) -> None:
        """Make checkpoint ``key``'s state the kernel's; raises :class:`CheckpointError`."""
        ...

    def checkpoints(self) -> list[int]:
        """Keys of the checkpoints held now (some may have been evicted)."""
        ...

    def lost(self) -> dict[int, str]:
        """Checkpoints dropped without being asked to: key -> why (evicted, died)."""
        ...


@runtime_checkable
class SupportsLookahead(Protocol):
    """An :class:`EngineKernel` that can send the next cell while the host finishes one.

    The cell loop of a run (not a session's, not one that writes durable checkpoints: both
    act on the kernel between cells) calls :meth:`run_cell_then` instead of
    :meth:`~EngineKernel.run_cell` when it knows the next code cell it will run. The loop then
    asks for cell ``then`` next, or stops the kernel (a cancel, the run's deadline): a cell
    sent ahead never runs unasked.
    """

    def run_cell_then(
        self,
        nb: NotebookNode,
        index: int,
        limit: float | None,
        then: int,
        *,
        before: float | None = None,
    ) -> CellEnd:
        """:meth:`EngineKernel.run_cell`; and as soon as the cell has completed (or failed
        where its tag allows it), before its last output is read, send cell ``then`` to the
        kernel, so that it starts at once, and say so (:attr:`CellEnd.next_sent`); the next
        :meth:`~EngineKernel.run_cell` (or :meth:`run_cell_then`) for ``then`` waits for it
        instead of sending it. Nothing is sent after a failed cell, nor once
        ``time.monotonic()`` reached ``before`` (the loop will act on the kernel then)."""
        ...


@runtime_checkable
class SupportsState(Protocol):
    """An :class:`EngineKernel` whose state can be written to files and read back (durable
    checkpoints): ``content`` is a request of the kernel side's (``_kernels/inside/
    state_files.py``), the answer its reply."""

    def state(self, content: Mapping[str, Any]) -> dict[str, Any]: ...


class StateUnusable(RuntimeError):
    """A stored state could not be read into the kernel; the kernel is not used (a fresh one
    runs every cell). The message says why."""


class StateKeeper(Protocol):
    """Durable checkpoints as the cell loop sees them (``_checkpoints.keeper``): a stored
    state read back before the first cell, and an ``on_cell_executed`` observer that writes
    states after cells (subscribed to the job's :class:`CellHooks` while the cells run)."""

    def restore(
        self, kernel: EngineKernel, nb: NotebookNode, cells: list[int], outcome: EngineOutcome
    ) -> list[int]:
        """Before the first cell, on the run's ``kernel`` (kept, for the states written
        later): read a stored state into it when one matches, fill the cells it stands for
        (``outcome.reused``), and return the cells left to run. Raises :class:`StateUnusable`
        when the kernel was touched and must not be used; asked again with a fresh kernel,
        it reads nothing back."""
        ...

    def cell_executed(self, event: CellRan) -> None:
        """A code cell ended: write the state when it completed and the policy says so (never
        when the next cell was sent already: ``event.next_sent``). Never raises for what it
        could not do."""
        ...

    def quiet_until(self) -> float | None:
        """Until when (a ``time.monotonic()``) the policy writes no state after a cell that
        ends then, but the last (None: none before the last): until then, the next cell may be
        sent as one completes."""
        ...


class Engine(Protocol):
    """Opens a kernel for a job; never raises for a failure in the notebook.

    ``open`` may be called from several threads at once
    (:meth:`~notebook_executor.NotebookExecutor.execute_many`). A kernel that cannot start
    raises (any exception; its message says why): the run is then recorded as failed on its
    first code cell (``kernel_died``, or ``timeout`` once the run's deadline has passed;
    ``cancelled`` when the job's ``cancel`` was set meanwhile), and a session raises
    :class:`~notebook_executor.KernelStartError`.

    Two hooks are optional, each a protocol of its own so that an engine has either, both or
    neither: :class:`SupportsPrepare` (a head start before any run is known) and
    :class:`SupportsPrestart` (start a checked job's kernel while its run records are written).
    """

    def open(self, job: RunJob) -> EngineKernel:
        """A started kernel for ``job`` (its kernel, working directory and environment),
        within ``job.start_timeout`` seconds (the cell loop always sets it). The job's
        ``cancel`` event (or Ctrl-C) ends the wait: raise ``KeyboardInterrupt``."""
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
        and :meth:`Engine.open` is called with the same job; ``open`` then gives that kernel.
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

    Its kernels (:class:`ScriptedKernel`) are driven by the executor's cell loop, as the real
    kernels are, so the cells are taken by the same rules: markdown and raw cells and cells
    tagged ``skip-execution`` are passed over, a blank code cell completes without running;
    every other code cell gets the kernel's next execution count (from 1) and the outputs the
    handler returns. An ``error`` output among them fails the run there with a ``cell_error``
    (a ``SystemExit`` with no status or 0 ends it early and successfully, as ``sys.exit()``
    does on a kernel). The handler may instead return a :class:`CellFailure` (a ``timeout`` or
    a ``kernel_died``, say), which ends the run at that cell as it says; one of kind
    ``cancelled`` is Ctrl-C. Outputs the handler appends to the cell itself stay before those
    it returns (what a kernel sent before it timed out or died, say). Each cell's time is the
    handler's. Sessions run on it too: its kernels take checkpoints (of the execution count,
    and of what :meth:`ScriptedKernel.snapshot` returns). Every job opened is kept in
    :attr:`jobs`.

    Parameters
    ----------
    handler : callable, optional
        ``handler(job, index) -> outputs or CellFailure``; by default each cell produces no
        output. ``job.nb`` is the notebook being run (a session's as it is at that step).

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
        #: Every job opened, in order.
        self.jobs: list[RunJob] = []
        #: How many times :meth:`close` was called.
        self.closed = 0

    def open(self, job: RunJob) -> ScriptedKernel:
        """A kernel for ``job`` that answers with the handler; see the class."""
        self.jobs.append(job)
        return ScriptedKernel(job, self.handler)

    def close(self) -> None:
        """Nothing to release; counts the calls."""
        self.closed += 1


class ScriptedKernel:
    """A :class:`ScriptedEngine`'s kernel: ``handler(job, index)`` answers each cell.

    Follows :class:`EngineKernel` and :class:`SupportsCheckpoints`. A checkpoint keeps the
    execution count and what :meth:`snapshot` returns (None here: a subclass with state of its
    own, such as a namespace, returns a copy of it and takes it back in :meth:`reinstate`).
    """

    info: Mapping[str, Any] = {"language_info": {"name": "python"}}

    def __init__(
        self, job: RunJob, handler: Callable[[RunJob, int], CellReply] | None = None
    ) -> None:
        self.job = job
        self.handler = handler
        #: The last execution count given.
        self.count = 0
        #: False once stopped or closed: a cell then finds the kernel dead.
        self.running = True
        self._saved: dict[int, tuple[int, Any]] = {}

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        """Give cell ``index`` its scripted outputs; see :class:`ScriptedEngine`."""
        from ._notebook import from_dict

        if not self.running:
            return CellEnd("dead")
        job = self.job if nb is self.job.nb else replace(self.job, nb=nb)
        cell = nb.cells[index]
        self.count += 1
        cell["execution_count"] = self.count
        cell["outputs"] = []
        reply = () if self.handler is None else self.handler(job, index)
        on_output = job.hooks.output_hook()
        if isinstance(reply, CellFailure):
            return self._failed(reply)
        for output in reply:
            node = from_dict(dict(output))
            cell["outputs"].append(node)
            if on_output is not None:
                on_output(index, node)
        errors = [o for o in cell["outputs"] if o.get("output_type") == "error"]
        return CellEnd("error" if errors else "ok", idle=True)

    def _failed(self, failure: CellFailure) -> CellEnd:
        if failure.kind == "cancelled":
            raise KeyboardInterrupt
        how: Literal["error", "timeout", "dead"] = (
            "error"
            if failure.kind == "cell_error"
            else "timeout"
            if failure.kind == "timeout"
            else "dead"
        )
        if how == "dead":
            self.running = False
        return CellEnd(how, idle=True, failure=failure)

    def save_widgets(self, nb: NotebookNode) -> None:
        """No widgets: nothing to write."""

    def stop(self) -> None:
        """The kernel's state is lost: later cells find it dead."""
        self.running = False

    def close(self, *, clean: bool) -> None:
        """Nothing to release."""
        self.running = False
        self._saved.clear()

    # -- checkpoints (SupportsCheckpoints) ---------------------------------------------------

    def snapshot(self) -> Any:
        """The state a checkpoint keeps beside the execution count (None: none)."""
        return None

    def reinstate(self, state: Any) -> None:
        """Make ``state`` (a :meth:`snapshot`) the kernel's."""

    def checkpoint_unsupported(self) -> str | None:
        return None if self.running else "the kernel is not running"

    def checkpoint(self, key: int) -> None:
        if not self.running:
            raise CheckpointError("the kernel is not running")
        self._saved.pop(key, None)
        self._saved[key] = (self.count, self.snapshot())

    def restore(self, key: int) -> None:
        if key not in self._saved:
            raise CheckpointError(f"there is no checkpoint {key}")
        self.count, state = self._saved[key]
        self.reinstate(state)
        self.running = True

    def checkpoints(self) -> list[int]:
        return list(self._saved)

    def lost(self) -> dict[int, str]:
        return {}
