"""How one notebook runs on one kernel: the only module that talks to kernels.

The seam is :mod:`notebook_executor.engine`. :class:`KernelEngine` executes cells through
nbclient on a fresh kernel per run, with a per-cell timeout, a whole-run deadline (nbclient has
none: each cell gets the smaller of its own limit and what is left of the run), and a truthful
account of what ran: cells that never ran keep no execution count and no outputs. Tests of
everything around the engine can hand the executor any object with the same ``run`` method.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..engine import CellFailure, EngineOutcome, RunCancelled, RunJob
from .launch import RunningKernel

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from .pool import KernelLoop, KernelPool

__all__ = ["KERNEL_READY_TIMEOUT", "KernelEngine"]

logger = logging.getLogger(__name__)

#: Longest a kernel may take to start and answer, when the run itself has no deadline.
KERNEL_READY_TIMEOUT = 60.0


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class KernelEngine:
    """The real engine: nbclient on a fresh Jupyter kernel process for every run.

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

    def run(self, job: RunJob) -> EngineOutcome:
        """Execute ``job`` on a fresh kernel; see :class:`Engine`."""
        outcome = EngineOutcome()
        current = _CurrentCell()
        finished = threading.Event()

        loop, pool = self._kernel_loop()

        async def guarded() -> None:
            try:
                await self._run(pool, job, outcome, current)
            finally:
                finished.set()

        future = loop.submit(guarded())
        try:
            future.result()
        except KeyboardInterrupt:
            future.cancel()
            # Let the run stop its kernel before the caller sees the interrupt.
            finished.wait(timeout=10)
            if outcome.failure is None and current.index is not None:
                outcome.failure = CellFailure(
                    current.index, "cancelled", "KeyboardInterrupt", "the run was cancelled", []
                )
            raise RunCancelled(outcome) from None
        return outcome

    def prestart(self, job: RunJob) -> None:
        """Start the kernel ``job`` will need now, while the caller still prepares the run
        (see :class:`~notebook_executor.engine.SupportsPrestart`)."""
        if not any(cell.cell_type == "code" for cell in job.nb.cells):
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
        from .pool import KernelLoop, KernelPool

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
        code_cells = [i for i, c in enumerate(job.nb.cells) if c.cell_type == "code"]
        first = code_cells[0] if code_cells else None
        if first is None:
            return
        ready_timeout = KERNEL_READY_TIMEOUT
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
        from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

        limit: dict[str, float | None] = {"seconds": None}
        client = _client_class()(
            job.nb,
            km=kernel.manager,
            timeout_func=lambda cell: limit["seconds"],
            allow_errors=False,
            record_timing=True,
            iopub_timeout=4,
            raise_on_iopub_timeout=False,
        )
        client.kc = kernel.client
        client.output_hook = job.on_output
        for index, cell in enumerate(job.nb.cells):
            if cell.cell_type != "code":
                continue
            current.index = index
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                outcome.failure = _timeout_failure(index, job, whole_run=True)
                return False
            limit["seconds"] = _smaller(job.cell_timeout, remaining)
            outcome.cell_started[index] = _now_iso()
            began = time.monotonic()
            try:
                await client.async_execute_cell(cell, index)
            except CellExecutionError as exc:
                outcome.failure = _cell_error(index, cell, exc)
            except CellTimeoutError:
                whole_run = deadline is not None and (
                    job.cell_timeout is None or deadline - began < job.cell_timeout
                )
                outcome.failure = _timeout_failure(index, job, whole_run=whole_run)
            except DeadKernelError:
                outcome.failure = _death_failure(index, kernel)
            finally:
                outcome.cell_seconds[index] = round(time.monotonic() - began, 6)
            if outcome.failure is not None:
                # After a cell error the kernel is healthy: stop it politely.
                return outcome.failure.kind == "cell_error"
            outcome.completed.append(index)
            job.cell_done(index)
        current.index = None
        return True


@functools.cache
def _client_class() -> type[Any]:
    """nbclient's client, telling ``job.on_output`` of each output as it arrives."""
    from nbclient import NotebookClient

    class _Client(NotebookClient):  # type: ignore[misc]
        output_hook: Callable[[int, Mapping[str, Any]], None] | None = None

        def process_message(
            self, msg: dict[str, Any], cell: NotebookNode, cell_index: int
        ) -> NotebookNode | None:
            output = super().process_message(msg, cell, cell_index)
            if output is not None and self.output_hook is not None:
                try:
                    self.output_hook(cell_index, output)
                except Exception as exc:
                    logger.debug("the output callback failed: %s", exc)
            return output

    return _Client


@dataclass
class _CurrentCell:
    """The index of the code cell the kernel is running, None between cells."""

    index: int | None = None


def _smaller(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _cell_error(index: int, cell: NotebookNode, exc: Exception) -> CellFailure:
    for output in reversed(cell.get("outputs", [])):
        if output.get("output_type") == "error":
            return CellFailure(
                index,
                "cell_error",
                str(output.get("ename", "")),
                str(output.get("evalue", "")),
                [str(line) for line in output.get("traceback", [])],
            )
    return CellFailure(
        index,
        "cell_error",
        str(getattr(exc, "ename", type(exc).__name__)),
        str(getattr(exc, "evalue", exc)),
        [],
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
