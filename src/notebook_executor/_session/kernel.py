"""The kernel of a session, as the session sees it: cells run one at a time, checkpoints kept.

:class:`SessionKernel` is what :class:`~notebook_executor._session.session.Session` needs;
unit tests hand it a fake. :class:`LoopKernel` is the real one: a Jupyter kernel driven from
an event loop of its own, cells run with :mod:`notebook_executor._kernels.cells`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._errors import KernelStartError
from .._kernels.cells import CellEnd, Displays, execute_cell, is_blank
from .._kernels.live import CheckpointError
from .._kernels.widgets import Widgets
from ..engine import KernelChoice

if TYPE_CHECKING:
    from .._kernels.forkserver import ForkChannel
    from .._kernels.live import LiveKernel
    from .._kernels.loop import KernelLoop
    from .._notebook import NotebookNode

__all__ = ["CheckpointError", "LoopKernel", "SessionKernel"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Longest a session's kernel may take to start (seconds).
START_TIMEOUT = 120.0

#: Longest to wait for a cell's output after its reply, when the cell has no time limit.
IOPUB_SECONDS = 300.0


class SessionKernel(Protocol):
    """A kernel a session steps through. Checkpoint keys are job cell indices (``-1``: the
    fresh kernel)."""

    def start(self) -> None:
        """Start a fresh kernel (stopping the current one and dropping every checkpoint)."""
        ...

    def execute(self, nb: NotebookNode, index: int, timeout: float | None) -> CellEnd:
        """Run code cell ``index`` of ``nb``; its outputs go into the cell."""
        ...

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

    def language_info(self) -> dict[str, Any]:
        """The kernel's ``language_info``."""
        ...

    def save_widgets(self, nb: NotebookNode) -> None:
        """Write the state of the kernel's widget models into ``nb``'s metadata, as a run
        does (:meth:`Widgets.save <notebook_executor._kernels.widgets.Widgets.save>`)."""
        ...

    def stop(self) -> None:
        """Stop the kernel now (after a timeout: its state is lost); checkpoints stay."""
        ...

    def shutdown(self) -> None:
        """Stop the kernel and drop every checkpoint; leaves no process behind."""
        ...


class LoopKernel:
    """A session's real kernel: a :class:`~notebook_executor._kernels.live.LiveKernel`
    started on this machine and driven from an event loop of its own.

    Parameters
    ----------
    choice, cwd, env
        The kernel, its working directory and its environment (those of the plan).
    checkpoint_memory : int, optional
        Most bytes the checkpoints may hold; the oldest are evicted first.
    template : callable, optional
        The template process to fork each kernel from (the executor's, as ``execute`` does),
        or None to launch it: a fork is ready in a fraction of a launch's time.
    """

    def __init__(
        self,
        choice: KernelChoice,
        cwd: Path,
        env: dict[str, str],
        checkpoint_memory: int | None = None,
        template: Callable[[], ForkChannel | None] | None = None,
    ) -> None:
        from .._kernels.loop import KernelLoop

        self.choice = choice
        self.cwd = cwd
        self.env = env
        self.checkpoint_memory = checkpoint_memory
        self.template = template
        self._loop: KernelLoop = KernelLoop()
        self._live: LiveKernel | None = None
        # What a run keeps across its cells (:class:`~notebook_executor._kernels.kernel_engine.
        # KernelEngine`), kept across the session's steps: displays a later cell may update,
        # and the widgets' state and Output widgets' captures; a copy of both with each
        # checkpoint, put back with its state.
        self._displays = Displays()
        self._widgets = Widgets()
        self._saved: dict[int, tuple[Displays, Widgets]] = {}

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        from .._kernels.loop import result_of  # Ctrl-C reaches the caller while it waits

        return result_of(self._loop.submit(coroutine))

    def start(self) -> None:
        from .._kernels.forkserver import ForkServerError
        from .._kernels.live import LiveKernel

        self._end()
        # Forked from the template; should it be gone as it is asked, from the new one the
        # executor starts in its place; should that fail too, launched.
        for attempt in range(3):
            server = None
            if self.template is not None and attempt < 2:
                try:
                    server = self.template()
                except Exception as exc:  # no template: the kernel is launched, as without one
                    logger.info("a session kernel will be launched, not forked: %s", exc)
            try:
                self._live = self._call(
                    LiveKernel.start(
                        self.choice,
                        cwd=self.cwd,
                        env=self.env,
                        ready_timeout=START_TIMEOUT,
                        forkserver=server,
                    )
                )
            except ForkServerError as exc:
                if server is None:
                    raise KernelStartError(f"the kernel did not start: {exc}") from None
                logger.warning("the kernel template could not fork: %s", exc)
                continue
            except (RuntimeError, OSError, TimeoutError) as exc:
                raise KernelStartError(
                    f"the kernel did not start: {exc or type(exc).__name__}"
                ) from None
            break
        assert self._live is not None
        self._live.memory_limit = self.checkpoint_memory
        self._displays = Displays()
        self._widgets = Widgets(self._live.client)
        self._saved = {}

    def execute(self, nb: NotebookNode, index: int, timeout: float | None) -> CellEnd:
        live = self._live
        if live is None:
            return CellEnd("dead")
        if is_blank(nb.cells[index]):
            return CellEnd("ok", idle=True)
        return self._call(
            execute_cell(
                live.client,
                nb,
                index,
                timeout=timeout,
                iopub_timeout=math.ceil(max(1.0, timeout or IOPUB_SECONDS)),
                alive=live.alive,
                displays=self._displays,
                widgets=self._widgets,
            )
        )

    def checkpoint_unsupported(self) -> str | None:
        if self._live is None:
            return "the kernel is not running"
        return self._live.checkpoint_unsupported()

    def checkpoint(self, key: int) -> None:
        if self._live is None:
            raise CheckpointError("the kernel is not running")
        refused = self._call(self._live.checkpoint(key))
        if refused is not None:
            raise CheckpointError(refused)
        self._saved[key] = (_copy_displays(self._displays), self._widgets.snapshot())

    def restore(self, key: int) -> None:
        if self._live is None:
            raise CheckpointError("the kernel is not running")
        self._call(self._live.restore(key))
        # The displays and widgets of the state restored, not those of the cells run since.
        displays, widgets = self._saved.get(key, (Displays(), Widgets()))
        self._displays = _copy_displays(displays)
        self._widgets = widgets.snapshot()
        self._widgets.client = self._live.client

    def checkpoints(self) -> list[int]:
        return [] if self._live is None else list(self._live.checkpoints)

    def lost(self) -> dict[int, str]:
        return {} if self._live is None else dict(self._live.lost)

    def language_info(self) -> dict[str, Any]:
        return {} if self._live is None else self._live.language_info

    def save_widgets(self, nb: NotebookNode) -> None:
        self._widgets.save(nb)

    def stop(self) -> None:
        live = self._live
        if live is None:
            return
        try:
            self._call(live.kernel.stop(now=True))
        except Exception as exc:  # a kernel already gone: nothing is left to stop
            logger.debug("stopping a session kernel: %s", exc)

    def _end(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            try:
                self._call(live.shutdown())
            except Exception as exc:
                logger.warning("a session kernel did not stop cleanly: %s", exc)

    def shutdown(self) -> None:
        try:
            self._end()
        finally:
            self._loop.stop()


def _copy_displays(displays: Displays) -> Displays:
    """The same outputs under the same display ids, in lists of its own."""
    return Displays(
        {
            display_id: {cell: list(outputs) for cell, outputs in cells.items()}
            for display_id, cells in displays.shown.items()
        }
    )
