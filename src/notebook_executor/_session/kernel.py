"""The kernel of a session, as the session sees it: cells run one at a time, checkpoints kept.

:class:`SessionKernel` is what :class:`~notebook_executor._session.session.Session` needs;
unit tests hand it a fake. :class:`LoopKernel` is the real one: a Jupyter kernel driven from
an event loop of its own, cells run with :mod:`notebook_executor._kernels.cells`.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._kernels.cells import CellEnd, Displays, execute_cell, is_blank
from ..engine import KernelChoice

if TYPE_CHECKING:
    from .._kernels.launch import RunningKernel
    from .._kernels.pool import KernelLoop
    from .._notebook import NotebookNode

__all__ = ["CheckpointError", "LoopKernel", "SessionKernel"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Longest a session's kernel may take to start (seconds).
START_TIMEOUT = 120.0

#: Longest to wait for a cell's output after its reply, when the cell has no time limit.
IOPUB_SECONDS = 300.0


class CheckpointError(Exception):
    """A checkpoint could not be taken or restored; the message says why."""


class SessionKernel(Protocol):
    """A kernel a session steps through. Checkpoint keys are job cell indices (``-1``: the
    fresh kernel)."""

    def start(self) -> None:
        """Start a fresh kernel (stopping the current one, if any)."""
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

    def language_info(self) -> dict[str, Any]:
        """The kernel's ``language_info``."""
        ...

    def stop(self) -> None:
        """Stop the kernel now (after a timeout: its state is lost); checkpoints stay."""
        ...

    def shutdown(self) -> None:
        """Stop the kernel and drop every checkpoint; leaves no process behind."""
        ...


class LoopKernel:
    """A session's real kernel: started fresh on this machine, driven from its own loop.

    Parameters
    ----------
    choice, cwd, env
        The kernel, its working directory and its environment (those of the plan).
    checkpoint_memory : int, optional
        Most bytes the checkpoints may hold; the oldest are evicted first.
    """

    def __init__(
        self,
        choice: KernelChoice,
        cwd: Path,
        env: dict[str, str],
        checkpoint_memory: int | None = None,
    ) -> None:
        from .._kernels.pool import KernelLoop

        self.choice = choice
        self.cwd = cwd
        self.env = env
        self.checkpoint_memory = checkpoint_memory
        self._loop: KernelLoop = KernelLoop()
        self._kernel: RunningKernel | None = None
        self._displays = Displays()
        self._info: dict[str, Any] = {}

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.submit(coroutine).result()

    def start(self) -> None:
        from .._kernels.launch import start_kernel

        self.stop()
        self._kernel = self._call(
            start_kernel(self.choice, cwd=self.cwd, env=self.env, ready_timeout=START_TIMEOUT)
        )
        self._displays = Displays()
        self._info = dict(self._kernel.info)

    def execute(self, nb: NotebookNode, index: int, timeout: float | None) -> CellEnd:
        kernel = self._kernel
        if kernel is None:
            return CellEnd("dead")
        if is_blank(nb.cells[index]):
            return CellEnd("ok", idle=True)
        return self._call(
            execute_cell(
                kernel.client,
                nb,
                index,
                timeout=timeout,
                iopub_timeout=math.ceil(max(1.0, timeout or IOPUB_SECONDS)),
                alive=kernel.manager.is_alive,
                displays=self._displays,
            )
        )

    def checkpoint_unsupported(self) -> str | None:
        if not sys.platform.startswith("linux"):
            return f"checkpoints need Linux (this is {sys.platform})"
        if self.choice.language.lower() not in ("python", "python3"):
            return f"checkpoints need a Python kernel (this one runs {self.choice.language})"
        return "checkpoints of a live kernel are not available in this version"

    def checkpoint(self, key: int) -> None:
        raise CheckpointError(self.checkpoint_unsupported() or "no checkpoint")

    def restore(self, key: int) -> None:
        raise CheckpointError(self.checkpoint_unsupported() or "no checkpoint")

    def checkpoints(self) -> list[int]:
        return []

    def language_info(self) -> dict[str, Any]:
        info = self._info.get("language_info")
        return dict(info) if isinstance(info, dict) else {}

    def stop(self) -> None:
        kernel, self._kernel = self._kernel, None
        if kernel is not None:
            try:
                self._call(kernel.stop(now=True))
            except Exception as exc:  # a kernel already gone: nothing is left to stop
                logger.debug("stopping a session kernel: %s", exc)

    def shutdown(self) -> None:
        try:
            self.stop()
        finally:
            self._loop.stop()
