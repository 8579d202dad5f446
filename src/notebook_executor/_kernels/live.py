"""A live kernel for one session, with checkpoints: copies of the kernel process at cell ends.

A :class:`LiveKernel` is a started kernel (:class:`~.launch.RunningKernel`, made by
:func:`~.launch.start_kernel`, forked from a template or launched as usual) that one session
owns and steps through. The session runs cells on it with the usual cell machinery
(:func:`~.cells.execute_cell` on :attr:`LiveKernel.client`, with ``alive`` =
:meth:`LiveKernel.alive`), and after a code cell asks for a **checkpoint**: the kernel process
forks from its main thread, between two messages; the copy holds the exact state (user
namespace, modules, random generator states) and waits, blocked, costing only the pages the
live kernel changes afterwards (copy-on-write). **Restoring** a checkpoint ends the current
kernel process and forks a new kernel from the copy, on a new connection file, with a new
client; the copy stays, so it can be restored again.

Interface (every coroutine runs on the loop the kernel was started on):

``await LiveKernel.start(choice, cwd=..., env=..., ready_timeout=..., forkserver=None,
context=None)``
    Start a kernel for a session (the arguments of :func:`~.launch.start_kernel`).
``LiveKernel(kernel, choice)``
    Or wrap a kernel started elsewhere (a pool's); the LiveKernel then owns it.
``client``, ``kernel`` (the current :class:`~.launch.RunningKernel`), ``info`` (its
``kernel_info_reply`` content), ``language_info``, ``await alive()``
    The current kernel; ``client`` and ``kernel`` change at every restore.
``checkpoint_unsupported() -> str | None``
    Why checkpoints cannot be taken, in words, or None. Known without asking the kernel:
    not Linux, a kernel that is not this interpreter's Python kernel; and, once the kernel
    refused a checkpoint, the reason it gave (cleared by the next checkpoint taken).
``await checkpoint(key) -> str | None``
    Take checkpoint ``key`` (a cell's source index), right after that cell ran; None once it
    is taken, else why it was not (the kernel refuses when the notebook started threads of its
    own, holds a GPU context, or has open comms such as widgets). Replaces an existing
    checkpoint of the same key.
``await restore(key)``
    End the current kernel and make a new one from checkpoint ``key``; raises
    :class:`CheckpointError` if there is none (see :attr:`lost`) or the new kernel does not
    start (the session then replays). Files the notebook wrote are not restored: a checkpoint
    is memory, not files.
``checkpoints``
    The keys of the checkpoints held, oldest first.
``lost``
    ``{key: reason}`` for the checkpoints dropped without being asked to (evicted under
    ``memory_limit``, or their process died).
``drop(key)``
    End checkpoint ``key`` (no error if there is none).
``memory_limit``, ``await account_memory() -> int``
    Bytes the checkpoints may hold (None: no limit). After each checkpoint, the memory they
    hold is measured in the background, and the oldest are evicted while it is over the limit;
    :meth:`account_memory` does it now and returns the bytes held.
``await shutdown()``
    End the kernel and every checkpoint, and everything they started.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import KernelChoice
from .launch import RunningKernel, start_kernel

if TYPE_CHECKING:
    from jupyter_client.asynchronous.client import AsyncKernelClient

    from .forkserver import ForkServer

__all__ = ["CheckpointError", "LiveKernel"]


class CheckpointError(RuntimeError):
    """A checkpoint could not be restored (or is not held)."""


class LiveKernel:
    """A session's kernel, with checkpoints (see the module's docstring)."""

    def __init__(self, kernel: RunningKernel, choice: KernelChoice) -> None:
        self.kernel = kernel
        self.choice = choice
        self.memory_limit: int | None = None
        self.lost: dict[int, str] = {}
        self._refused: str | None = None

    @classmethod
    async def start(
        cls,
        choice: KernelChoice,
        *,
        cwd: Path,
        env: dict[str, str],
        ready_timeout: float,
        forkserver: ForkServer | None = None,
        context: Any = None,
    ) -> LiveKernel:
        """Start a kernel for a session and wrap it."""
        kernel = await start_kernel(
            choice,
            cwd=cwd,
            env=env,
            ready_timeout=ready_timeout,
            forkserver=forkserver,
            context=context,
        )
        return cls(kernel, choice)

    @property
    def client(self) -> AsyncKernelClient:
        """The client of the current kernel (a new one after each restore)."""
        return self.kernel.client

    @property
    def info(self) -> dict[str, Any]:
        """The current kernel's ``kernel_info_reply`` content."""
        return self.kernel.info

    @property
    def language_info(self) -> dict[str, Any]:
        """The current kernel's ``language_info``."""
        value = self.kernel.info.get("language_info")
        return dict(value) if isinstance(value, dict) else {}

    @property
    def alive(self) -> Callable[[], Awaitable[bool]]:
        """Whether the current kernel process lives (for ``execute_cell``'s ``alive``)."""
        return self.kernel.manager.is_alive

    @property
    def checkpoints(self) -> list[int]:
        """Keys of the checkpoints held, oldest first."""
        return []

    def checkpoint_unsupported(self) -> str | None:
        """Why checkpoints cannot be taken, or None."""
        if not sys.platform.startswith("linux"):
            return "checkpoints need Linux"
        return "checkpoints are not implemented yet"

    async def checkpoint(self, key: int) -> str | None:
        """Take checkpoint ``key``; None once taken, else why not."""
        return self.checkpoint_unsupported()

    async def restore(self, key: int) -> None:
        """Replace the current kernel by a new one made from checkpoint ``key``."""
        raise CheckpointError(f"no checkpoint {key}")

    def drop(self, key: int) -> None:
        """End checkpoint ``key``, if held."""

    async def account_memory(self) -> int:
        """Measure the memory the checkpoints hold, evict over the limit; return the bytes."""
        return 0

    async def shutdown(self) -> None:
        """End the kernel, every checkpoint, and what they started."""
        await self.kernel.stop(now=True)
