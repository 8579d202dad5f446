"""The one cell loop: how the code cells of a run, or of a session's step, run on a kernel.

An engine only opens kernels and runs one cell on request (:mod:`notebook_executor.engine`);
this loop owns everything around the cells, for runs and sessions alike: which cells run
(:func:`~notebook_executor._notebook.code_cell_indices`: markdown, raw and ``skip-execution``
cells are passed over; a blank code cell completes without being sent, as with nbclient), the
time limits (:class:`Limits`: the kernel's start, the smaller of the start limit and what is
left of the run's ``timeout``; each cell's, the smaller of its ``cell_timeout`` and what is
left), how a kernel's start or a cell's end becomes a failure (an error, a clean
``sys.exit()``, a timeout, a dead kernel with its exit status, Ctrl-C), the "output lost"
marker of a cell whose output was still arriving, the widgets' state written at the end, the
job's observers (:class:`~notebook_executor.engine.CellHooks`: told of each cell's start and
end), and cancellation: Ctrl-C or the job's ``cancel`` event, while the kernel starts or a
cell runs, stops the kernel and raises :class:`~notebook_executor.engine.RunCancelled` with
what ran so far.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from .._notebook import code_cell_indices, is_blank, skipped
from .._records.files import note_files
from .._times import iso, now_utc
from .._types import TIMEOUTS
from ..engine import (
    CellEnd,
    CellFailure,
    CellRan,
    CellStart,
    EngineOutcome,
    RunCancelled,
    StateUnusable,
    SupportsLookahead,
)

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from ..engine import Engine, EngineKernel, RunJob

__all__ = [
    "CANCELLED",
    "OUTPUT_LOST_MARKER",
    "CellRan",
    "Limits",
    "cell_error",
    "clean_exit",
    "code_cell_indices",
    "is_blank",
    "open_kernel",
    "run_cells",
    "run_job",
    "set_language_info",
    "skipped",
]

logger = logging.getLogger(__name__)

CANCELLED = "the run was cancelled"

#: Marker of a cell's output cut short, at the place of the cut (:func:`_mark_output_lost`).
OUTPUT_LOST_MARKER = "[notebook-executor: output lost here: {why}]\n"


@dataclass(frozen=True)
class Limits:
    """The time limits of a run or a step: ``timeout`` bounds the whole (from ``started``, a
    ``time.monotonic()``), ``cell_timeout`` each cell; None: no limit. ``whole`` names the
    whole in messages (``"run"``, ``"step"``). ``kernel_start`` bounds a kernel's start (the
    job's ``start_timeout`` when it gives one), within the whole's deadline."""

    cell_timeout: float | None
    timeout: float | None
    started: float
    whole: str = "run"
    kernel_start: float = TIMEOUTS.kernel_start

    @property
    def deadline(self) -> float | None:
        return None if self.timeout is None else self.started + self.timeout

    def start_limit(self) -> float:
        """How long a kernel may take to start from now: ``kernel_start``, or what is left of
        the whole when that is less (at least 10 ms: the engine still tries)."""
        deadline = self.deadline
        if deadline is None:
            return self.kernel_start
        return max(0.01, min(self.kernel_start, deadline - time.monotonic()))


def clean_exit(cell: NotebookNode) -> bool:
    """Whether the cell's error is a ``SystemExit`` with status 0 or none, as papermill reads
    it (IPython reports ``sys.exit(0)`` as an error output ``SystemExit: 0``)."""
    errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    return bool(errors) and all(
        out.get("ename") == "SystemExit" and str(out.get("evalue", "")) in ("", "0")
        for out in errors
    )


def cell_error(index: int, cell: NotebookNode, reply: Mapping[str, Any]) -> CellFailure:
    """How cell ``index`` failed with an error: its last error output, else the reply's."""
    for output in reversed(cell.get("outputs", [])):
        if output.get("output_type") == "error":
            return CellFailure(
                index,
                "cell_error",
                str(output.get("ename", "")),
                str(output.get("evalue", "")),
                [str(line) for line in output.get("traceback", [])],
            )
    content = reply.get("content", {})
    return CellFailure(
        index,
        "cell_error",
        str(content.get("ename", "")),
        str(content.get("evalue", "")),
        [str(line) for line in content.get("traceback", [])],
    )


def run_job(engine: Engine, job: RunJob) -> EngineOutcome:
    """Run every code cell of ``job.nb`` on a kernel ``engine`` opens for it; the outcome.

    Never raises for what the notebook or its kernel did; Ctrl-C (or ``job.cancel``) raises
    :class:`RunCancelled` with the outcome so far. The run's ``timeout`` counts from here,
    the kernel's start included.
    """
    outcome = EngineOutcome()
    limits = Limits(
        job.cell_timeout,
        job.timeout,
        time.monotonic(),
        kernel_start=_start_timeout(job),
    )
    cells = code_cell_indices(job.nb)
    if not cells:
        return outcome
    kernel = _open(engine, job, limits, outcome, cells[0])
    if kernel is None:
        return outcome
    outcome.kernel_seconds = time.monotonic() - limits.started
    set_language_info(job.nb, kernel.info)
    clean = False
    todo = cells
    keeper = job.state
    if keeper is not None:
        try:
            todo = keeper.restore(kernel, job.nb, cells, outcome)
        except StateUnusable as why:
            # The kernel's state is unknown now: a fresh kernel runs every cell.
            outcome.state_notes.append(f"every cell ran: {why}")
            try:
                kernel.stop()
            finally:
                kernel.close(clean=False)
            kernel = _open(engine, job, limits, outcome, cells[0])
            if kernel is None:
                return outcome
            todo = keeper.restore(kernel, job.nb, cells, outcome)
    observing = (
        contextlib.nullcontext()
        if keeper is None
        else job.hooks.observing(on_cell_executed=keeper.cell_executed)
    )
    try:
        with observing:
            clean = run_cells(
                kernel,
                job,
                job.nb,
                todo,
                limits,
                outcome,
                lookahead=True,
                quiet_until=None if keeper is None else keeper.quiet_until,
            )
    except Exception as exc:
        # The engine's machinery failed (not a cell): the caller records what completed.
        if getattr(exc, "outcome", None) is None:
            with contextlib.suppress(AttributeError, TypeError):
                exc.outcome = outcome  # type: ignore[attr-defined]
        raise
    finally:
        try:
            kernel.save_widgets(job.nb)
        finally:
            kernel.close(clean=clean)
    return outcome


def _open(
    engine: Engine, job: RunJob, limits: Limits, outcome: EngineOutcome, first: int
) -> EngineKernel | None:
    """The job's kernel; None (the failure set on the first code cell) if it did not start."""
    try:
        return open_kernel(engine, job, limits)
    except KeyboardInterrupt as interrupt:
        _interrupted(outcome, first, interrupt)
    except Exception as exc:
        deadline = limits.deadline
        timed_out = deadline is not None and time.monotonic() >= deadline
        message = str(exc) or type(exc).__name__
        if not message.startswith("the kernel did not start"):
            message = f"the kernel did not start: {message}"
        outcome.failure = CellFailure(
            first, "timeout" if timed_out else "kernel_died", "KernelStartError", message, []
        )
        return None


def open_kernel(engine: Engine, job: RunJob, limits: Limits | None = None) -> EngineKernel:
    """``engine.open(job)`` within ``limits`` (by default the job's ``start_timeout``, else
    :attr:`Timeouts.kernel_start <notebook_executor._types.Timeouts.kernel_start>`): the job's
    ``start_timeout`` is set to :meth:`Limits.start_limit` first, which the engine honours.
    The job's ``cancel`` event, set before or while the kernel starts, raises
    :class:`RunCancelled` (a kernel started all the same is closed first); so does Ctrl-C.
    What the engine raises otherwise goes on."""
    if limits is None:
        limits = Limits(None, None, time.monotonic(), kernel_start=_start_timeout(job))
    cancel = job.cancel
    if cancel is not None and cancel.is_set():
        raise RunCancelled
    job.start_timeout = limits.start_limit()
    try:
        kernel = engine.open(job)
    except RunCancelled:
        raise
    except KeyboardInterrupt:
        raise RunCancelled from None
    except Exception:
        if cancel is not None and cancel.is_set():
            raise RunCancelled from None  # the start was cut short by the cancel
        raise
    if cancel is not None and cancel.is_set():
        # The engine did not see the event in time: the kernel must not run a cell.
        try:
            kernel.stop()
        finally:
            kernel.close(clean=False)
        raise RunCancelled
    return kernel


def _start_timeout(job: RunJob) -> float:
    return job.start_timeout or TIMEOUTS.kernel_start


def _interrupted(outcome: EngineOutcome, index: int, interrupt: BaseException | None) -> NoReturn:
    """Ctrl-C before any kernel ran a cell: raise it, as a :class:`RunCancelled`."""
    stop = interrupt if isinstance(interrupt, RunCancelled) else RunCancelled()
    stop.outcome = outcome
    outcome.failure = CellFailure(index, stop.kind, stop.ename, stop.message, [])
    raise stop from None


def run_cells(
    kernel: EngineKernel,
    job: RunJob,
    nb: NotebookNode,
    cells: Sequence[int],
    limits: Limits,
    outcome: EngineOutcome,
    *,
    stop_at_exit: bool = True,
    lookahead: bool = False,
    quiet_until: Callable[[], float | None] | None = None,
) -> bool:
    """Run code cells ``cells`` of ``nb`` on ``kernel``, in order, within ``limits``.

    Fills ``outcome`` (completed cells, their times, the failure, the exit) and tells the
    job's observers (``job.hooks``) of each cell's start and, completed or not, of its end.
    Stops at the first failure (stopping the kernel
    unless it was a cell error: its state is then lost) and, with ``stop_at_exit``, after a
    cell that ended with ``sys.exit()``. Returns whether the kernel is still clean (no cell
    left running). Ctrl-C or ``job.cancel`` stops the kernel and raises
    :class:`RunCancelled`. With ``lookahead``, a kernel that follows
    :class:`~notebook_executor.engine.SupportsLookahead` is sent each next cell as the one
    before completes, unless ``quiet_until()`` (asked as each cell starts: an observer that
    acts on the kernel between cells, the durable checkpoints' keeper) says the cell will end
    past the time it acts; every path that does not then ask for that cell next stops the
    kernel (a cancel, the deadline). A session does not: it acts on the kernel between cells.
    """
    hooks = job.hooks
    ahead = kernel if lookahead and isinstance(kernel, SupportsLookahead) else None
    for position, index in enumerate(cells):
        cell = nb.cells[index]
        if job.cancel is not None and job.cancel.is_set():
            _cancelled(kernel, job, outcome, index)
        deadline = limits.deadline
        remaining = None if deadline is None else deadline - time.monotonic()
        started, began = iso(now_utc()), time.monotonic()
        if remaining is not None and remaining <= 0:
            outcome.failure = _timeout_failure(index, limits, whole=True)
            hooks.cell_executed(CellRan(index, started, 0.0, outcome.failure, False))
            kernel.stop()
            return False
        limit = _smaller(limits.cell_timeout, remaining)
        hooks.cell_started(CellStart(index, started))
        outcome.cell_started[index] = started
        end = None
        if not is_blank(cell):
            then = None if ahead is None else _following(nb, cells, position)
            try:
                if ahead is None or then is None:
                    end = kernel.run_cell(nb, index, limit)
                else:
                    before = None if quiet_until is None else quiet_until()
                    end = ahead.run_cell_then(nb, index, limit, then, before=before)
            except KeyboardInterrupt as interrupt:
                outcome.cell_seconds[index] = round(time.monotonic() - began, 6)
                _cancelled(kernel, job, outcome, index, started, interrupt)
        seconds = round(time.monotonic() - began, 6)
        outcome.cell_seconds[index] = seconds
        if end is not None:
            note_files(outcome.files, end.reply)
        failure, exited = _judge(index, cell, end, limits, began, limit)
        if failure is None and end is not None and not end.idle:
            _mark_output_lost(cell, index, limit, outcome)
        if failure is not None and failure.kind == "cancelled":
            _cancelled(kernel, job, outcome, index, started)
        outcome.failure = failure
        if failure is None:
            outcome.completed.append(index)
        sent = end is not None and end.next_sent
        hooks.cell_executed(CellRan(index, started, seconds, failure, exited, next_sent=sent))
        if failure is not None:
            if failure.kind != "cell_error":
                kernel.stop()
            # After a cell error the kernel is healthy: it may be stopped politely.
            return failure.kind == "cell_error"
        if exited:
            # sys.exit(), sys.exit(0), raise SystemExit: the run ends here, successfully.
            outcome.exited = index
            if stop_at_exit:
                break
    return True


def _following(nb: NotebookNode, cells: Sequence[int], position: int) -> int | None:
    """The cell to send ahead after ``cells[position]``: the next one, unless it is blank
    (it completes without being sent) or there is none."""
    if position + 1 >= len(cells):
        return None
    following = cells[position + 1]
    return None if is_blank(nb.cells[following]) else following


def _judge(
    index: int,
    cell: NotebookNode,
    end: CellEnd | None,
    limits: Limits,
    began: float,
    limit: float | None,
) -> tuple[CellFailure | None, bool]:
    """How cell ``index`` ended: its failure (None: completed), and whether it exited."""
    if end is None or end.how == "ok":
        return None, False
    if end.failure is not None:
        return end.failure, False
    if end.how == "error":
        if clean_exit(cell):
            return None, True
        return cell_error(index, cell, end.reply), False
    if end.how == "timeout":
        deadline = limits.deadline
        whole = deadline is not None and (
            limits.cell_timeout is None or deadline - began < limits.cell_timeout
        )
        return _timeout_failure(index, limits, whole=whole), False
    if end.how == "cancelled":
        return CellFailure(index, "cancelled", "KeyboardInterrupt", CANCELLED, []), False
    return _death_failure(index, end), False


def _cancelled(
    kernel: EngineKernel,
    job: RunJob,
    outcome: EngineOutcome,
    index: int,
    started: str | None = None,
    interrupt: BaseException | None = None,
) -> NoReturn:
    """Ctrl-C or the cancel event: stop the kernel (its cell must not run on), tell the
    observers of the cell that was running (``started``), then raise ``interrupt`` (a
    :class:`RunCancelled`, which says how the cell is recorded) or a :class:`RunCancelled`,
    holding the outcome."""
    stop = interrupt if isinstance(interrupt, RunCancelled) else RunCancelled()
    stop.outcome = outcome
    outcome.failure = CellFailure(index, stop.kind, stop.ename, stop.message, [])
    try:
        kernel.stop()
    finally:
        if started is not None:
            seconds = outcome.cell_seconds.get(index, 0.0)
            job.hooks.cell_executed(CellRan(index, started, seconds, outcome.failure, False))
    raise stop from None


def set_language_info(nb: NotebookNode, info: Mapping[str, Any]) -> None:
    """The notebook's ``language_info`` as its kernel describes itself, as nbclient sets it
    (from the ``kernel_info_reply`` the kernel gave when it started: no extra round trip)."""
    language_info = info.get("language_info")
    if isinstance(language_info, Mapping) and language_info:
        from .._notebook import from_dict

        nb.metadata["language_info"] = from_dict(dict(language_info))


def _mark_output_lost(
    cell: NotebookNode, index: int, limit: float | None, outcome: EngineOutcome
) -> None:
    """Mark, at its end, a cell whose output was still arriving when the wait for it ended."""
    from .._kernels.cells import iopub_seconds
    from .._notebook import new_output

    waited = iopub_seconds(limit)
    why = (
        f"the cell finished but its output was still arriving {waited:g} s later; "
        "the rest was not kept"
    )
    cell.outputs.append(
        new_output("stream", name="stderr", text=OUTPUT_LOST_MARKER.format(why=why))
    )
    outcome.output_lost.append(index)


def _smaller(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _timeout_failure(index: int, limits: Limits, *, whole: bool) -> CellFailure:
    if whole and limits.timeout is not None:
        message = (
            f"the {limits.whole} exceeded its timeout of {limits.timeout:g} s "
            "while this cell was running"
        )
    elif limits.cell_timeout is not None:
        message = f"the cell exceeded its cell_timeout of {limits.cell_timeout:g} s"
    else:
        message = "the cell timed out"
    return CellFailure(index, "timeout", "TimeoutError", message, [])


def _death_failure(index: int, end: CellEnd) -> CellFailure:
    message = "the kernel died while this cell was running"
    if end.exit_status is not None:
        message += f" (exit status {end.exit_status})"
    return CellFailure(index, "kernel_died", "DeadKernelError", message, end.stderr[-20:])
