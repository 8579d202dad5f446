"""How one notebook runs on one kernel: the only module that talks to kernels.

The seam is :mod:`notebook_executor.engine`. :class:`KernelEngine` executes cells (with
:mod:`.cells`, on jupyter_client) on a fresh kernel per run, with a per-cell timeout, a whole-run
deadline (each cell gets the smaller of its own limit and what is left of the run), and a truthful
account of what ran: cells that never ran keep no execution count and no outputs. Tests of
everything around the engine can hand the executor any object with the same ``run`` method.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..engine import CellFailure, EngineOutcome, RunCancelled, RunJob
from .launch import RunningKernel

if TYPE_CHECKING:
    from pathlib import Path

    from .._notebook import NotebookNode
    from ..engine import KernelChoice
    from .cells import Displays
    from .forkserver import ForkChannel
    from .loop import KernelLoop
    from .pool import KernelPool
    from .widgets import Widgets

__all__ = ["KERNEL_READY_TIMEOUT", "KernelEngine", "cell_error", "clean_exit", "skipped"]

logger = logging.getLogger(__name__)

#: Longest a kernel may take to start and answer, when the run itself has no deadline.
KERNEL_READY_TIMEOUT = 60.0

#: Longest to wait for a cell's output after its reply, when the run has no time limit.
IOPUB_DRAIN_SECONDS = 300.0


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class KernelEngine:
    """The real engine: a fresh Jupyter kernel process for every run.

    Parameters
    ----------
    warm_kernels : int, optional
        Ready kernels to keep once the engine has run something (default
        :data:`~notebook_executor._kernels.pool.DEFAULT_WARM_KERNELS`); 0 starts a kernel when a run
        asks for it. Either way no kernel ever serves two runs.
    fork : bool, default True
        Fork kernels from a template process that has already imported ipykernel and the
        common data modules (Linux, native kernel only); otherwise launch each one.
    """

    def __init__(self, *, warm_kernels: int | None = None, fork: bool = True) -> None:
        from .pool import DEFAULT_WARM_KERNELS

        size = DEFAULT_WARM_KERNELS if warm_kernels is None else warm_kernels
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"warm_kernels must be an int >= 0, got {warm_kernels!r}")
        self.warm_kernels = size
        self.fork = fork
        self._loop: KernelLoop | None = None
        self._pool: KernelPool | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._running: dict[concurrent.futures.Future[None], _CurrentCell] = {}

    def run(self, job: RunJob) -> EngineOutcome:
        """Execute ``job`` on a fresh kernel; see :class:`Engine`."""
        outcome = EngineOutcome()
        current = _CurrentCell()
        finished = threading.Event()

        from .loop import result_of

        loop, pool = self._kernel_loop()

        async def guarded() -> None:
            try:
                await self._run(pool, job, outcome, current)
            finally:
                finished.set()

        future = loop.submit(guarded())
        with self._lock:
            self._running[future] = current
        try:
            result_of(future, job.cancel)
        except (KeyboardInterrupt, concurrent.futures.CancelledError):
            # Ctrl-C in this thread, the job's cancel event, or cancel() from another thread.
            current.cancelled = True
            future.cancel()
            # Let the run stop its kernel before the caller sees the interrupt.
            finished.wait(timeout=10)
            if outcome.failure is None and current.index is not None:
                outcome.failure = CellFailure(
                    current.index, "cancelled", "KeyboardInterrupt", CANCELLED, []
                )
            raise RunCancelled(outcome) from None
        finally:
            with self._lock:
                self._running.pop(future, None)
        return outcome

    def cancel(self) -> None:
        """Cancel every run in progress, from any thread: each kills its kernel at once and
        its :meth:`run` raises :class:`RunCancelled` (what Ctrl-C does to a run in the
        calling thread, for runs in other threads)."""
        with self._lock:
            running = list(self._running.items())
        for future, cell in running:
            cell.cancelled = True
            future.cancel()

    def prestart(self, job: RunJob) -> None:
        """Start the kernel ``job`` will need now, while the caller still prepares the run
        (see :class:`~notebook_executor.engine.SupportsPrestart`)."""
        if not any(cell.cell_type == "code" and not skipped(cell) for cell in job.nb.cells):
            return
        loop, pool = self._kernel_loop()

        async def prestart() -> None:
            pool.prestart(job.kernel, job.cwd, job.env)

        loop.submit(prestart())

    def prepare_kernel(self) -> None:
        """Prepare the first kernel start before the first run is known (see
        :class:`~notebook_executor.engine.SupportsPrepare` and :meth:`KernelPool.prepare
        <notebook_executor._kernels.pool.KernelPool.prepare>`)."""
        if not self.fork:
            return
        loop, pool = self._kernel_loop()

        async def prepare() -> None:
            pool.prepare()

        loop.submit(prepare())

    def template(self, choice: KernelChoice, cwd: Path, env: dict[str, str]) -> ForkChannel | None:
        """The template a kernel outside runs (a session's) forks from, or None to launch it
        (see :meth:`KernelPool.template <notebook_executor._kernels.pool.KernelPool.template>`).
        """
        if not self.fork or not choice.native:
            return None
        from .loop import result_of

        loop, pool = self._kernel_loop()
        return result_of(loop.submit(pool.template(env, cwd, choice.interpreter)))

    def close(self) -> None:
        """Stop every kernel (running, warm or starting) and the fork server."""
        with self._lock:
            self._closed = True
            loop, pool = self._loop, self._pool
            self._loop = self._pool = None
        if loop is None:
            return
        try:
            if pool is not None:
                loop.submit(pool.close()).result(timeout=60)
        except Exception as exc:
            logger.warning("could not stop every kernel cleanly: %s", exc)
        finally:
            loop.stop()

    @property
    def pool(self) -> KernelPool | None:
        """The engine's kernel pool, once it has run something."""
        return self._pool

    def _kernel_loop(self) -> tuple[KernelLoop, KernelPool]:
        from .loop import KernelLoop
        from .pool import KernelPool

        with self._lock:
            if self._closed:
                raise RuntimeError("this engine is closed")
            if self._loop is None or self._pool is None:
                self._loop = KernelLoop()
                self._pool = KernelPool(self.warm_kernels, fork=self.fork)
            return self._loop, self._pool

    async def _run(
        self, pool: KernelPool, job: RunJob, outcome: EngineOutcome, current: _CurrentCell
    ) -> None:
        import asyncio

        started = time.monotonic()
        deadline = None if job.timeout is None else started + job.timeout
        code_cells = [
            i for i, c in enumerate(job.nb.cells) if c.cell_type == "code" and not skipped(c)
        ]
        first = code_cells[0] if code_cells else None
        if first is None:
            return
        ready_timeout = job.start_timeout or KERNEL_READY_TIMEOUT
        if deadline is not None:
            ready_timeout = max(0.01, min(ready_timeout, deadline - time.monotonic()))
        try:
            kernel = await asyncio.wait_for(
                pool.acquire(job.kernel, job.cwd, job.env, ready_timeout),
                timeout=ready_timeout + 5,
            )
        except (asyncio.TimeoutError, TimeoutError, RuntimeError, OSError) as exc:
            timed_out = deadline is not None and time.monotonic() >= deadline
            outcome.failure = CellFailure(
                first,
                "timeout" if timed_out else "kernel_died",
                "KernelStartError",
                f"the kernel did not start: {exc or type(exc).__name__}",
                [],
            )
            return
        outcome.kernel_seconds = time.monotonic() - started
        _set_language_info(job.nb, kernel.info)
        clean = False
        try:
            clean = await self._execute_cells(job, kernel, deadline, outcome, current)
        finally:
            pool.release(kernel, clean=clean)

    async def _execute_cells(
        self,
        job: RunJob,
        kernel: RunningKernel,
        deadline: float | None,
        outcome: EngineOutcome,
        current: _CurrentCell,
    ) -> bool:
        from .cells import Displays
        from .widgets import Widgets

        displays = Displays()
        widgets = Widgets(kernel.client)
        try:
            return await self._execute_code_cells(
                job, kernel, deadline, outcome, current, displays, widgets
            )
        finally:
            widgets.save(job.nb)

    async def _execute_code_cells(
        self,
        job: RunJob,
        kernel: RunningKernel,
        deadline: float | None,
        outcome: EngineOutcome,
        current: _CurrentCell,
        displays: Displays,
        widgets: Widgets,
    ) -> bool:
        from .cells import execute_cell, is_blank

        for index, cell in enumerate(job.nb.cells):
            if cell.cell_type != "code" or skipped(cell):
                continue
            current.index = index
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                outcome.failure = _timeout_failure(index, job, whole_run=True)
                return False
            limit = _smaller(job.cell_timeout, remaining)
            # Output may still be arriving after the reply: wait for it within the run's
            # limits (or :data:`IOPUB_DRAIN_SECONDS` without any).
            iopub_timeout = math.ceil(max(1.0, limit or IOPUB_DRAIN_SECONDS))
            job.cell_starting(index)
            outcome.cell_started[index] = _now_iso()
            began = time.monotonic()
            exited = False
            end = None
            if not is_blank(cell):
                # (A blank cell is never sent, as with nbclient: it keeps what it has.)
                end = await execute_cell(
                    kernel.client,
                    job.nb,
                    index,
                    timeout=limit,
                    iopub_timeout=iopub_timeout,
                    alive=kernel.manager.is_alive,
                    displays=displays,
                    on_output=job.on_output,
                    widgets=widgets,
                )
            outcome.cell_seconds[index] = round(time.monotonic() - began, 6)
            if end is None or end.how == "ok":
                pass
            elif end.how == "error":
                exited = clean_exit(cell)
                if not exited:
                    outcome.failure = cell_error(index, cell, end.reply)
            elif end.how == "timeout":
                whole_run = deadline is not None and (
                    job.cell_timeout is None or deadline - began < job.cell_timeout
                )
                outcome.failure = _timeout_failure(index, job, whole_run=whole_run)
            elif end.how == "cancelled" or current.cancelled:
                outcome.failure = CellFailure(
                    index, "cancelled", "KeyboardInterrupt", CANCELLED, []
                )
            else:
                outcome.failure = _death_failure(index, kernel)
            if outcome.failure is None and end is not None and not end.idle:
                _mark_output_lost(cell, index, iopub_timeout, outcome)
            if outcome.failure is not None:
                # After a cell error the kernel is healthy: stop it politely.
                return outcome.failure.kind == "cell_error"
            outcome.completed.append(index)
            job.cell_done(index)
            if exited:
                # sys.exit(), sys.exit(0), raise SystemExit: the run ends here, successfully.
                outcome.exited = index
                break
        current.index = None
        return True


CANCELLED = "the run was cancelled"


def _set_language_info(nb: NotebookNode, info: Mapping[str, Any]) -> None:
    """The notebook's ``language_info`` as its kernel describes itself, as nbclient sets it
    (from the ``kernel_info_reply`` the kernel gave when it started: no extra round trip)."""
    language_info = info.get("language_info")
    if isinstance(language_info, Mapping) and language_info:
        from .._notebook import from_dict

        nb.metadata["language_info"] = from_dict(dict(language_info))


#: Marker of a cell's output cut short, at the place of the cut (:func:`_mark_output_lost`).
OUTPUT_LOST_MARKER = "[notebook-executor: output lost here: {why}]\n"


def _mark_output_lost(
    cell: NotebookNode, index: int, waited: float, outcome: EngineOutcome
) -> None:
    """Mark, at its end, a cell whose output was still arriving when the wait for it ended."""
    from .._notebook import new_output

    why = (
        f"the cell finished but its output was still arriving {waited:g} s later; "
        "the rest was not kept"
    )
    cell.outputs.append(
        new_output("stream", name="stderr", text=OUTPUT_LOST_MARKER.format(why=why))
    )
    outcome.output_lost.append(index)


@dataclass
class _CurrentCell:
    """The index of the code cell the kernel is running (None between cells), and whether
    the run was cancelled from another thread."""

    index: int | None = None
    cancelled: bool = False


def _smaller(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def skipped(cell: NotebookNode) -> bool:
    """Whether ``cell`` is tagged ``skip-execution`` (nbclient's and nbmake's convention)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return isinstance(tags, list) and "skip-execution" in tags


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


def _timeout_failure(index: int, job: RunJob, *, whole_run: bool) -> CellFailure:
    if whole_run:
        message = f"the run exceeded its timeout of {job.timeout:g} s while this cell was running"
    else:
        message = f"the cell exceeded its cell_timeout of {job.cell_timeout:g} s"
    return CellFailure(index, "timeout", "TimeoutError", message, [])


def _death_failure(index: int, kernel: RunningKernel) -> CellFailure:
    exit_status = _exit_status(kernel)
    message = "the kernel died while this cell was running"
    if exit_status is not None:
        message += f" (exit status {exit_status})"
    tail = kernel.stderr_tail()
    traceback = tail.splitlines()[-20:] if tail else []
    return CellFailure(index, "kernel_died", "DeadKernelError", message, traceback)


def _exit_status(kernel: RunningKernel) -> int | None:
    provisioner = getattr(kernel.manager, "provisioner", None)
    process = getattr(provisioner, "process", None)
    if process is None:
        return None
    with contextlib.suppress(Exception):
        code = process.poll()
        return None if code is None else int(code)
    return None
