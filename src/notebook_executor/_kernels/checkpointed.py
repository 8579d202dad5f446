"""A session's kernel: a :class:`~.live.LiveKernel` as an engine kernel that takes checkpoints.

What :meth:`KernelEngine.open <notebook_executor._kernels.kernel_engine.KernelEngine.open>`
gives a job that asks for checkpoints (a session's): a kernel of its own (not the pool's),
forked from the engine's template when it can be, else launched, on the engine's event loop.
It follows :class:`~notebook_executor.engine.EngineKernel` and
:class:`~notebook_executor.engine.SupportsCheckpoints`. What a run keeps across its cells
(displays a later cell may update, the widgets' state and Output widgets' captures) it keeps
across the session's steps, with a copy of both in each checkpoint, put back with its state.

Stopping and closing never wait for ever: the kernel loop may be stuck on a process that is
gone (a template killed with its socket's other end held elsewhere). Past :data:`STOP_SECONDS`
the kernel's session and its checkpoints' are killed from here, by their process ids.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import KernelStartError
from .._types import TIMEOUTS
from ..engine import CellEnd, CheckpointError
from .cells import Displays
from .widgets import Widgets

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from ..engine import RunJob
    from .forkserver import ForkChannel
    from .launch import RunningKernel
    from .live import LiveKernel
    from .loop import KernelLoop

__all__ = ["STOP_SECONDS", "CheckpointedKernel"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: How a cell runs: the engine's :meth:`run_cell
#: <notebook_executor._kernels.kernel_engine.KernelEngine.run_cell>`, as for a run's kernel.
CellRun = Callable[
    ["RunningKernel", "RunJob", "tuple[Displays, Widgets]", "NotebookNode", int, "float | None"],
    CellEnd,
]

#: Longest :meth:`CheckpointedKernel.stop` and :meth:`~CheckpointedKernel.close` wait for the
#: kernel loop (seconds); then what is left is killed by process id.
STOP_SECONDS = TIMEOUTS.kernel_stop


class CheckpointedKernel:
    """A session's live kernel; made by :meth:`start`."""

    def __init__(self, run: CellRun, loop: KernelLoop, job: RunJob, live: LiveKernel):
        self._run = run
        self._loop = loop
        self._job = job
        self._live: LiveKernel | None = live
        self._stopped = False
        live.memory_limit = job.checkpoint_memory
        self._displays = Displays()
        self._widgets = Widgets(live.client)
        self._saved: dict[int, tuple[Displays, Widgets]] = {}

    @property
    def info(self) -> dict[str, Any]:
        return {} if self._live is None else self._live.info

    @classmethod
    def start(
        cls,
        run: CellRun,
        loop: KernelLoop,
        job: RunJob,
        template: Callable[[], ForkChannel | None] | None,
    ) -> CheckpointedKernel:
        """Start the kernel: forked from ``template()``; should the template be gone as it
        is asked, from the new one the engine starts in its place; should that fail too,
        launched. Raises :class:`~notebook_executor.KernelStartError`."""
        from .forkserver import ForkServerError
        from .live import LiveKernel
        from .loop import result_of

        ready = job.start_timeout or TIMEOUTS.kernel_start  # the cell loop sets it
        for attempt in range(3):
            server = None
            if template is not None and attempt < 2:
                try:
                    server = template()
                except Exception as exc:  # no template: the kernel is launched, as without one
                    logger.info("a session kernel will be launched, not forked: %s", exc)
            future = loop.submit(
                LiveKernel.start(
                    job.kernel, cwd=job.cwd, env=job.env, ready_timeout=ready, forkserver=server
                )
            )
            try:
                live = result_of(future, job.cancel)
            except (KeyboardInterrupt, concurrent.futures.CancelledError):
                future.cancel()  # Ctrl-C or the job's cancel: the start is given up
                raise KeyboardInterrupt from None
            except ForkServerError as exc:
                if server is None:
                    raise KernelStartError(f"the kernel did not start: {exc}") from None
                logger.warning("the kernel template could not fork: %s", exc)
                continue
            except Exception as exc:
                raise KernelStartError(
                    f"the kernel did not start: {exc or type(exc).__name__}"
                ) from None
            return cls(run, loop, job, live)
        raise KernelStartError("the kernel did not start: the template could not fork")

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        from .loop import result_of  # Ctrl-C reaches the caller while it waits

        return result_of(self._loop.submit(coroutine))

    def _call_within(self, coroutine: Coroutine[Any, Any, T], seconds: float) -> T:
        """:meth:`_call`, given up after ``seconds`` (:class:`TimeoutError`)."""
        from .loop import WAIT_SLICE

        future = self._loop.submit(coroutine)
        deadline = time.monotonic() + seconds
        while True:
            try:
                return future.result(timeout=WAIT_SLICE)
            except concurrent.futures.TimeoutError:
                if future.done():
                    return future.result()
            if time.monotonic() >= deadline:
                future.cancel()
                raise TimeoutError(f"no answer from the kernel loop within {seconds:g} s")

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        live = self._live
        if live is None or self._stopped:
            return CellEnd("dead")
        return self._run(live.kernel, self._job, (self._displays, self._widgets), nb, index, limit)

    def checkpoint_unsupported(self) -> str | None:
        if self._live is None or self._stopped:
            return "the kernel is not running"
        return self._live.checkpoint_unsupported()

    def checkpoint(self, key: int) -> None:
        if self._live is None or self._stopped:
            raise CheckpointError("the kernel is not running")
        refused = self._call(self._live.checkpoint(key))
        if refused is not None:
            raise CheckpointError(refused)
        self._saved[key] = (_copy_displays(self._displays), self._widgets.snapshot())

    def restore(self, key: int) -> None:
        if self._live is None:
            raise CheckpointError("the kernel is not running")
        self._call(self._live.restore(key))
        self._stopped = False
        # The displays and widgets of the state restored, not those of the cells run since.
        displays, widgets = self._saved.get(key, (Displays(), Widgets()))
        self._displays = _copy_displays(displays)
        self._widgets = widgets.snapshot()
        self._widgets.client = self._live.client

    def checkpoints(self) -> list[int]:
        return [] if self._live is None else list(self._live.checkpoints)

    def lost(self) -> dict[int, str]:
        return {} if self._live is None else dict(self._live.lost)

    def save_widgets(self, nb: NotebookNode) -> None:
        self._widgets.save(nb)

    def stop(self) -> None:
        """Stop the kernel process now; its checkpoints stay (a restore starts a new one)."""
        live = self._live
        if live is None or self._stopped:
            return
        self._stopped = True
        leader = live.pid
        try:
            self._call_within(live.kernel.stop(now=True), STOP_SECONDS)
        except TimeoutError as exc:
            logger.warning("a session kernel did not stop: %s; killed", exc)
            _kill([leader])
        except Exception as exc:  # a kernel already gone: nothing is left to stop
            logger.debug("stopping a session kernel: %s", exc)

    def close(self, *, clean: bool = False) -> None:
        """End the kernel and every checkpoint, and everything they started."""
        live, self._live = self._live, None
        if live is not None:
            leaders: list[int | None] = [live.pid]
            with contextlib.suppress(RuntimeError):  # read while the loop may change them
                leaders += live.checkpoint_pids()
            try:
                self._call_within(live.shutdown(), STOP_SECONDS)
            except TimeoutError as exc:
                logger.warning("a session kernel did not stop: %s; killed", exc)
                _kill(leaders)
            except Exception as exc:
                logger.warning("a session kernel did not stop cleanly: %s", exc)
                _kill(leaders)


def _kill(leaders: list[int | None]) -> None:
    """SIGKILL the sessions led by ``leaders`` (a kernel, checkpoints: each leads its own)."""
    from .inside.sessions import kill_sessions

    kill_sessions([pid for pid in leaders if pid is not None])


def _copy_displays(displays: Displays) -> Displays:
    """The same outputs under the same display ids, in lists of its own."""
    return Displays(
        {
            display_id: {cell: list(outputs) for cell, outputs in cells.items()}
            for display_id, cells in displays.shown.items()
        }
    )
