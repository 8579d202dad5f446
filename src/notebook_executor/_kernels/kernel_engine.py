"""The real engine: Jupyter kernels, forked from a warm template or launched, one per run.

The seam is :mod:`notebook_executor.engine`: :class:`KernelEngine` opens kernels (from its
:class:`~.pool.KernelPool` for runs; kernels that take checkpoints for sessions, see
:mod:`.checkpointed`) and runs one cell at a time on request (with :mod:`.cells`, on
jupyter_client); the executor's cell loop (``_run/cell_loop.py``) drives them and owns their
limits: a kernel starts within the job's ``start_timeout``, a cell runs within the limit the
loop gives :meth:`KernelEngine.run_cell`, the one way a cell runs on either kind of kernel.
Every kernel of an engine lives on the engine's event loop (:mod:`.loop`); the calling thread
waits in slices, so Ctrl-C and the job's ``cancel`` reach it at once.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._errors import KernelStartError
from .._types import TIMEOUTS
from ..engine import CellEnd, EngineKernel, RunJob, StateUnusable
from .inside.preload import DATA_PACKAGES
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

__all__ = ["KernelEngine", "imported_packages", "template_hints"]

logger = logging.getLogger(__name__)


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
        #: The cells running now (their futures on the loop), for :meth:`cancel`.
        self._running: set[concurrent.futures.Future[Any]] = set()

    def open(self, job: RunJob) -> EngineKernel:
        """A fresh kernel for ``job`` (see :class:`~notebook_executor.engine.Engine`): one of
        the pool's for a run; for a session (``job.checkpoints``), one of its own that takes
        checkpoints, forked from the pool's template when it can be. Raises
        :class:`~notebook_executor.KernelStartError` if it does not start within the job's
        ``start_timeout`` (the cell loop sets it), ``KeyboardInterrupt`` if the job's
        ``cancel`` is set first."""
        from .loop import result_of

        loop, pool = self._kernel_loop()
        if job.checkpoints:
            from .checkpointed import CheckpointedKernel

            return CheckpointedKernel.start(
                self.run_cell,
                loop,
                job,
                template=lambda: self.template(job.kernel, job.cwd, job.env, **template_hints(job)),
            )
        ready_timeout = job.start_timeout or TIMEOUTS.kernel_start

        async def acquire() -> RunningKernel:
            return await asyncio.wait_for(
                pool.acquire(job.kernel, job.cwd, job.env, ready_timeout, **template_hints(job)),
                timeout=ready_timeout + 5,
            )

        import asyncio

        future = loop.submit(acquire())
        try:
            kernel = result_of(future, job.cancel)
        except (KeyboardInterrupt, concurrent.futures.CancelledError):
            future.cancel()
            raise KeyboardInterrupt from None
        except (asyncio.TimeoutError, TimeoutError, RuntimeError, OSError) as exc:
            raise KernelStartError(
                f"the kernel did not start: {exc or type(exc).__name__}"
            ) from None
        return _PoolKernel(self, loop, pool, kernel, job)

    def run_cell(
        self,
        kernel: RunningKernel,
        job: RunJob,
        state: tuple[Displays, Widgets],
        nb: NotebookNode,
        index: int,
        limit: float | None,
        *,
        sent: str | None = None,
        then: Callable[[], None] | None = None,
    ) -> CellEnd:
        """Run cell ``index`` of ``nb`` on ``kernel`` within ``limit`` (see
        :meth:`EngineKernel.run_cell <notebook_executor.engine.EngineKernel.run_cell>`), on
        the engine's loop: the one way a cell runs, for a run's kernel and a session's.
        ``state``: the displays a later cell may update and the widgets, kept across cells.
        ``sent``: the id of the cell's request when it was sent already; ``then``: called on
        the loop once the cell completed, before its last output is read (see
        :func:`.cells.execute_cell`). Ctrl-C in this thread, the job's ``cancel`` event, or
        :meth:`cancel` from another thread ends the wait: the cell's wait on the loop is
        cancelled (the loop then stops the kernel) and this raises ``KeyboardInterrupt``."""
        from .cells import execute_cell, iopub_seconds

        displays, widgets = state
        cell = execute_cell(
            kernel.client,
            nb,
            index,
            timeout=limit,
            iopub_timeout=iopub_seconds(limit),
            alive=kernel.manager.is_alive,
            displays=displays,
            on_output=job.hooks.output_hook(),
            widgets=widgets,
            sent=sent,
            then=then,
        )
        loop = self._loop
        if loop is None:  # the engine was closed: its kernels with it
            cell.close()
            return CellEnd("dead")
        return kernel.account_for(self._wait(loop.submit(cell), job.cancel))

    def _wait(
        self, future: concurrent.futures.Future[CellEnd], cancel: threading.Event | None
    ) -> CellEnd:
        """The end of a cell running on the loop as ``future`` (see :meth:`run_cell`)."""
        from .loop import result_of

        with self._lock:
            self._running.add(future)
        try:
            return result_of(future, cancel)
        except (KeyboardInterrupt, concurrent.futures.CancelledError):
            future.cancel()
            with contextlib.suppress(Exception, KeyboardInterrupt):
                concurrent.futures.wait([future], timeout=TIMEOUTS.cancel_wait)
            raise KeyboardInterrupt from None
        finally:
            with self._lock:
                self._running.discard(future)

    def cancel(self) -> None:
        """Cancel every cell running now, from any thread: each run's kernel is stopped at
        once and its run raises :class:`~notebook_executor.engine.RunCancelled` (what Ctrl-C
        does to a run in the calling thread, for runs in other threads)."""
        with self._lock:
            running = list(self._running)
        for future in running:
            future.cancel()

    def prestart(self, job: RunJob) -> None:
        """Start the kernel ``job`` will need now, while the caller still prepares the run
        (see :class:`~notebook_executor.engine.SupportsPrestart`)."""
        from .._notebook import code_cell_indices

        if not code_cell_indices(job.nb):
            return
        loop, pool = self._kernel_loop()

        imports = template_hints(job)

        async def prestart() -> None:
            pool.prestart(job.kernel, job.cwd, job.env, **imports)

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

    def speculate(self, choice: KernelChoice, cwd: Path, env: dict[str, str]) -> None:
        """Start a kernel for a run that may come, none announced yet (the run server's spare
        child does, for the kernel of the run before it): a run whose kernel matches exactly
        takes it; any other leaves it to :meth:`close` (see :meth:`KernelPool.speculate
        <notebook_executor._kernels.pool.KernelPool.speculate>`)."""
        loop, pool = self._kernel_loop()

        async def speculate() -> None:
            pool.prepare()
            await pool.speculate(choice, cwd, dict(env))

        loop.submit(speculate())

    def template(
        self,
        choice: KernelChoice,
        cwd: Path,
        env: dict[str, str],
        *,
        data: bool = True,
        data_modules: bool = False,
    ) -> ForkChannel | None:
        """The template a kernel outside runs (a session's) forks from, or None to launch it
        (see :meth:`KernelPool.template <notebook_executor._kernels.pool.KernelPool.template>`;
        ``data``: its notebook imports beyond the standard library; ``data_modules``: a module
        the full template preloads).
        """
        if not self.fork or not choice.native:
            return None
        from .loop import result_of

        loop, pool = self._kernel_loop()
        asked = pool.template(env, cwd, choice.interpreter, data=data, data_modules=data_modules)
        return result_of(loop.submit(asked))

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


class _PoolKernel:
    """A run's kernel, taken from the pool; given back (or killed) when the run ends."""

    def __init__(
        self,
        engine: KernelEngine,
        loop: KernelLoop,
        pool: KernelPool,
        kernel: RunningKernel,
        job: RunJob,
    ) -> None:
        from .cells import Displays
        from .widgets import Widgets

        self._engine = engine
        self._loop = loop
        self._pool = pool
        self._kernel: RunningKernel | None = kernel
        self._job = job
        self.info = kernel.info
        self._state = (Displays(), Widgets(kernel.client))
        #: The cell whose request was sent ahead (``(id(nb), index)``), and the request's id.
        self._sent: tuple[tuple[int, int], str] | None = None

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        return self._run(nb, index, limit)

    def run_cell_then(
        self,
        nb: NotebookNode,
        index: int,
        limit: float | None,
        then: int,
        *,
        before: float | None = None,
    ) -> CellEnd:
        """:meth:`run_cell`, and once the cell completed, send cell ``then``'s request (see
        :class:`~notebook_executor.engine.SupportsLookahead`).

        Between two cells the host finishes the first (its last output, the observers, the
        record's timings) and the kernel used to wait for it: 0.9-1.4 ms per cell of a warm
        run of a four-cell notebook (the kernels' own timestamps, median of 20 runs,
        2026-11-29). Sent as the first cell's reply arrives, the next request reaches the
        kernel as it goes idle. A cell that failed sends nothing: nothing queued runs after
        it, whatever the kernel does with a queue after an error."""
        return self._run(nb, index, limit, then, before)

    def _run(
        self,
        nb: NotebookNode,
        index: int,
        limit: float | None,
        then: int | None = None,
        before: float | None = None,
    ) -> CellEnd:
        kernel = self._kernel
        if kernel is None:
            return CellEnd("dead")
        sent = None
        if self._sent is not None:
            expected, msg_id = self._sent
            self._sent = None
            if expected != (id(nb), index):
                # The kernel runs a cell the loop did not ask for: it must not run on.
                self.stop()
                raise RuntimeError(
                    f"cell {index} was asked for, but the kernel was sent cell {expected[1]}"
                )
            sent = msg_id
        send_next = None
        if then is not None:
            client = kernel.client

            def send_next() -> None:
                from .cells import send_cell

                if before is not None and time.monotonic() >= before:
                    return
                try:
                    self._sent = ((id(nb), then), send_cell(client, nb, then))
                except Exception as exc:  # sent when asked for, then, as without it
                    logger.debug("could not send cell %s ahead: %s", then, exc)

        end = self._engine.run_cell(
            kernel, self._job, self._state, nb, index, limit, sent=sent, then=send_next
        )
        end.next_sent = self._sent is not None
        return end

    def save_widgets(self, nb: NotebookNode) -> None:
        self._state[1].save(nb)

    def state(self, content: Mapping[str, Any]) -> dict[str, Any]:
        """Write the kernel's state to files, or read it back (:class:`~notebook_executor.
        engine.SupportsState`); raises :class:`~notebook_executor.engine.StateUnusable`."""
        from .loop import result_of
        from .state_request import state_request

        kernel = self._kernel
        if kernel is None:
            raise StateUnusable("the kernel is closed")
        return result_of(self._loop.submit(state_request(kernel, content, TIMEOUTS.checkpoint)))

    def stop(self) -> None:
        self._release(clean=False)

    def close(self, *, clean: bool) -> None:
        self._release(clean=clean)

    def _release(self, *, clean: bool) -> None:
        kernel, self._kernel = self._kernel, None
        if kernel is None:
            return
        pool = self._pool

        async def release() -> None:
            pool.release(kernel, clean=clean)

        from .loop import result_of

        # Quick (the kernel stops in the background), and done before the run returns: the
        # pool's state (a sweep's end) is then that of a finished run.
        result_of(self._loop.submit(release()))


#: The modules a statement imports, at the start of a line or after a ``;``: ``import a.b, c
#: as d`` or ``from a.b import c``.
_IMPORT = re.compile(
    r"(?:^|;)[ \t]*(?:from[ \t]+([A-Za-z_]\w*)|import[ \t]+([^#\n;]+))", re.MULTILINE
)


def imported_packages(job: RunJob) -> frozenset[str]:
    """The packages outside the standard library that a code cell of ``job``'s notebook
    imports (``import x`` or ``from x import y``, starting a line or after a ``;``): they decide
    which template the pool's kernels fork from (:mod:`.pool_starts`). A miss only costs speed:
    a kernel imports what its template did not."""
    from .._notebook import code_cell_indices

    found: set[str] = set()
    cells = job.nb.cells
    for index in code_cell_indices(job.nb):
        source = cells[index].source
        text = source if isinstance(source, str) else "".join(source)
        for match in _IMPORT.finditer(text):
            if match.group(1):
                names = [match.group(1)]
            else:
                names = [
                    (part.split() or [""])[0].partition(".")[0]
                    for part in match.group(2).split(",")
                ]
            found.update(name for name in names if name and name not in sys.stdlib_module_names)
    return frozenset(found)


def template_hints(job: RunJob) -> dict[str, bool]:
    """What the pool is told of ``job``'s imports, which decides the template its kernel forks
    from (``data`` and ``data_modules`` of :meth:`KernelPool.acquire
    <notebook_executor._kernels.pool.KernelPool.acquire>`): ``data``, a package outside the
    standard library, which makes the template with the data modules worth its start once runs
    repeat; ``data_modules``, one of the packages that template preloads (scrapbook, pandas,
    numpy, pyarrow: :data:`.inside.preload.DATA_PACKAGES`), which makes it worth it even for
    the pool's first kernel: it saves that kernel those imports."""
    packages = imported_packages(job)
    return {"data": bool(packages), "data_modules": not DATA_PACKAGES.isdisjoint(packages)}
