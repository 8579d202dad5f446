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
``LiveKernel(kernel, choice, cwd=..., env=..., context=..., ready_timeout=...)``
    Or wrap a kernel started elsewhere (a pool's: then not released to the pool); the
    LiveKernel owns it from then on. Kernels forked from the template restore faster (their
    command line is parsed already).
``client``, ``kernel`` (the current :class:`~.launch.RunningKernel`), ``info`` (its
``kernel_info_reply`` content), ``language_info``, ``await alive()``
    The current kernel; ``client`` and ``kernel`` change at every restore.
``last_checkpoint_seconds``
    What the last checkpoint cost the kernel (mostly the fork, which grows with the kernel's
    resident memory): a session may skip checkpoints after cells cheaper than that to rerun.
``checkpoint_pids()``, ``pid``
    The processes of the checkpoints, and of the current kernel.
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
``await restart()``
    End the current kernel and start a fresh one (as the first), keeping the checkpoints.
``checkpoints``
    The keys of the checkpoints held, oldest first.
``lost``
    ``{key: reason}`` for the checkpoints dropped without being asked to (evicted under
    ``memory_limit``, or their process died).
``drop(key)``
    End checkpoint ``key`` (no error if there is none).
``memory_limit``, ``await account_memory(reserve=0) -> int``
    Bytes the checkpoints may hold (None: no limit). Enforced before it is exceeded, at each
    checkpoint: first the oldest are evicted while what they hold, plus room for what the
    next step may add (as much as the last step added, copying pages the checkpoints shared
    with the kernel), is over the limit; then the checkpoint is taken, measured once it is
    there, and the oldest evicted again while over. :meth:`account_memory` measures and
    evicts now and returns the bytes held.
``await shutdown()``
    End the kernel and every checkpoint, and everything they started.

How it works: the host asks the kernel with a shell message of its own, which no cell sees
(``kernel_main.CHECKPOINT_REQUEST``; ``inside/checkpoint_server.py`` is the kernel side). The copy
connects to this object's Unix socket (in a private kernel folder) and serves the fork
server's protocol there (:class:`Checkpoint`, a :class:`~.forkserver.ForkChannel`): a restore
is :func:`~.launch.start_kernel` forking from it, exactly as from the template.

Orphans: a checkpoint leads a session of its own, recorded in a kernel folder of its own
(:meth:`~.workdirs.Workdir.record_session`), swept as a kernel's; it exits, killing the
kernels it made, when its socket closes (this object closed, or the host died); a kernel made
from it dies with it (parent-death signal and pidfd watch). A checkpoint that the current
kernel was made from is kept, as that kernel's parent, until the kernel is replaced, even
once dropped or evicted (it is then no longer listed).

Memory: a checkpoint costs the pages the kernel changed since (copy-on-write). The memory the
checkpoints hold is measured as the proportional set size of anonymous memory
(``/proc/<pid>/smaps_rollup``) summed over the kernel and its checkpoints, less the kernel's
anonymous resident size: what the kernel alone would use (file pages, shared with other
processes too, are left out: see :func:`~.checkpoints.held_memory`). A measurement reads
every process's page tables (milliseconds per gigabyte), so it runs in a thread, after a
checkpoint, one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._types import TIMEOUTS
from ..engine import KernelChoice
from .checkpoints import Checkpoint, CheckpointError, held_memory, hello, smaps_rollup
from .forkserver import ForkChannel, fork_supported
from .launch import RunningKernel, client_context, start_kernel
from .workdirs import Workdir, make_workdir

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from jupyter_client.asynchronous.client import AsyncKernelClient

__all__ = ["Checkpoint", "CheckpointError", "LiveKernel", "smaps_rollup"]


logger = logging.getLogger(__name__)

#: Longest a kernel may take to answer a checkpoint request, and its copy to say hello.
CHECKPOINT_TIMEOUT = TIMEOUTS.checkpoint

#: The shell message that asks the kernel for a checkpoint (see ``inside/kernel_main.py``).
CHECKPOINT_REQUEST = "nbx_checkpoint_request"


class LiveKernel:
    """A session's kernel, with checkpoints (see the module's docstring)."""

    def __init__(
        self,
        kernel: RunningKernel,
        choice: KernelChoice,
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        context: Any = None,
        ready_timeout: float = 60.0,
        forkserver: ForkChannel | None = None,
    ) -> None:
        self.kernel = kernel
        self.forkserver = forkserver
        self.choice = choice
        self.memory_limit: int | None = None
        self.lost: dict[int, str] = {}
        #: Bytes the checkpoints held just after the last one was taken, and how much more
        #: they held by the next (what one step added): the room kept for the next step.
        self._held_after: int | None = None
        self._step_growth = 0
        self.ready_timeout = ready_timeout
        self._cwd = cwd or Path.cwd()
        self._env = dict(os.environ if env is None else env)
        #: The clients' zmq context: the caller's, or one of this object's own.
        self._context = context if context is not None else client_context()
        self._own_context = context is None
        self._refused: str | None = None
        #: Seconds the kernel spent on the last checkpoint asked for (checks and fork: the
        #: fork copies the page tables, so it grows with the kernel's memory, about 1 ms per
        #: 10 MB resident), or None.
        self.last_checkpoint_seconds: float | None = None
        #: Checkpoints by key, oldest first: taken, or forked and yet to say hello.
        self._held: OrderedDict[int, Checkpoint | asyncio.Future[Checkpoint]] = OrderedDict()
        #: The checkpoint the current kernel was made from (its parent), if any.
        self._parent: Checkpoint | None = None
        #: Dropped checkpoints kept as the current kernel's parent.
        self._retired: list[Checkpoint] = []
        self._kernel_ids = list(kernel.session_ids)
        self._workdir: Workdir | None = None
        self._listener: socket.socket | None = None
        self._acceptor: asyncio.Task[None] | None = None
        self._accounting: asyncio.Task[int] | None = None
        self._closed = False

    @classmethod
    async def start(
        cls,
        choice: KernelChoice,
        *,
        cwd: Path,
        env: dict[str, str],
        ready_timeout: float,
        forkserver: ForkChannel | None = None,
        context: Any = None,
    ) -> LiveKernel:
        """Start a kernel for a session (see :func:`~.launch.start_kernel`) and wrap it."""
        kernel = await start_kernel(
            choice,
            cwd=cwd,
            env=env,
            ready_timeout=ready_timeout,
            forkserver=forkserver,
            context=context,
        )
        return cls(
            kernel,
            choice,
            cwd=cwd,
            env=env,
            context=context,
            ready_timeout=ready_timeout,
            forkserver=forkserver,
        )

    # -- the current kernel ----------------------------------------------------------------

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
    def pid(self) -> int | None:
        """The current kernel's process id."""
        pid = getattr(self.kernel.manager.provisioner, "pid", None)
        return pid if isinstance(pid, int) else None

    # -- checkpoints -----------------------------------------------------------------------

    @property
    def checkpoints(self) -> list[int]:
        """Keys of the checkpoints held, oldest first."""
        self._forget_dead()
        return list(self._held)

    def _taken(self) -> list[Checkpoint]:
        """The checkpoints that have said hello, oldest first."""
        found = []
        for entry in self._held.values():
            if isinstance(entry, Checkpoint):
                found.append(entry)
            elif entry.done() and not entry.cancelled() and entry.exception() is None:
                found.append(entry.result())
        return found

    def checkpoint_pids(self) -> list[int]:
        """Process ids of every checkpoint process (held, or kept as the kernel's parent)."""
        processes = [*self._taken(), *self._retired]
        return [c.pid for c in processes if c.pidfd is not None]

    def checkpoint_unsupported(self) -> str | None:
        """Why checkpoints cannot be taken, or None (see the module's docstring)."""
        if not fork_supported():
            return f"checkpoints need Linux (this is {sys.platform})"
        if not self.choice.native:
            return (
                f"the kernel {self.choice.name!r} is not this interpreter's Python kernel, "
                "whose process can be copied"
            )
        return self._refused

    async def checkpoint(self, key: int) -> str | None:
        """Take checkpoint ``key``; None once taken, else why not."""
        if self._closed:
            raise CheckpointError("the live kernel is shut down")
        if not fork_supported() or not self.choice.native:
            return self.checkpoint_unsupported()
        if self.memory_limit is not None:
            await self._make_room()
        address = self._listen()
        # The copy says hello on its own time: the checkpoint is held from the reply on.
        self.drop(key)
        arriving: asyncio.Future[Checkpoint] = asyncio.get_running_loop().create_future()
        self._held[key] = arriving
        self.lost.pop(key, None)
        client = self.kernel.client
        request = client.session.msg(CHECKPOINT_REQUEST, {"address": address, "key": key})
        client.shell_channel.send(request)
        try:
            reply = await self._reply(request["header"]["msg_id"])
        except BaseException:
            self.drop(key)
            raise
        content = reply.get("content", {})
        seconds = content.get("seconds")
        self.last_checkpoint_seconds = seconds if isinstance(seconds, (int, float)) else None
        if content.get("status") != "ok":
            self.drop(key)
            ename, evalue = content.get("ename", ""), content.get("evalue", "")
            why = evalue if ename == "CheckpointRefused" else f"{ename}: {evalue}"
            self._refused = why or "the kernel refused the checkpoint"
            return self._refused
        self._refused = None
        if self.memory_limit is not None:
            # Measured once the copy is there (it says hello on its own time).
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(arriving), CHECKPOINT_TIMEOUT)
            self._held_after = await self.account_memory()
        return None

    async def restore(self, key: int) -> None:
        """Replace the current kernel by a new one made from checkpoint ``key``."""
        self._forget_dead()
        entry = self._held.get(key)
        if entry is None:
            why = self.lost.get(key, "it was never taken or was dropped")
            raise CheckpointError(f"no checkpoint {key}: {why}")
        if isinstance(entry, Checkpoint):
            source = entry
        else:
            try:
                source = await asyncio.wait_for(asyncio.shield(entry), CHECKPOINT_TIMEOUT)
            except (asyncio.TimeoutError, TimeoutError, asyncio.CancelledError):
                if self._held.get(key) is entry:
                    self.drop(key)
                    self.lost[key] = "its process never said hello"
                why = "its process never said hello"
                raise CheckpointError(f"no checkpoint {key}: {why}") from None
        # The old kernel is killed at once; waiting for it to be gone overlaps the new start.
        stopping = asyncio.ensure_future(self._stop_current())
        try:
            kernel = await start_kernel(
                self.choice,
                cwd=self._cwd,
                env=self._env,
                ready_timeout=self.ready_timeout,
                forkserver=source,
                context=self._context,
            )
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                await stopping
            raise CheckpointError(f"the kernel from checkpoint {key} did not start: {exc}") from exc
        finally:
            with contextlib.suppress(Exception):
                await stopping
        self.kernel = kernel
        self._parent = source

    async def restart(self) -> None:
        """Replace the current kernel by a fresh one (as :meth:`start` made the first), keeping
        the checkpoints: where a replay starts from nothing."""
        stopping = asyncio.ensure_future(self._stop_current())
        try:
            self.kernel = await start_kernel(
                self.choice,
                cwd=self._cwd,
                env=self._env,
                ready_timeout=self.ready_timeout,
                forkserver=self.forkserver,
                context=self._context,
            )
        finally:
            with contextlib.suppress(Exception):
                await stopping

    def drop(self, key: int) -> None:
        """End checkpoint ``key``, if held (kept as the current kernel's parent if it is)."""
        entry = self._held.pop(key, None)
        if entry is None:
            return
        if not isinstance(entry, Checkpoint):
            if not entry.done():
                # Its hello, when it comes, finds nobody waiting: the copy is ended then.
                entry.cancel()
                return
            if entry.cancelled() or entry.exception() is not None:
                return
            entry = entry.result()
        taken = entry
        if taken is self._parent:
            self._retired.append(taken)
        else:
            taken.close()

    def _forget_dead(self) -> None:
        for key, entry in list(self._held.items()):
            if isinstance(entry, Checkpoint) and not entry.alive():
                self.drop(key)
                self.lost[key] = "its process died"

    # -- memory ----------------------------------------------------------------------------

    def measure_memory(self) -> int:
        """Bytes the checkpoints hold beyond what the kernel alone uses (blocking)."""
        return held_memory(self.pid, self.checkpoint_pids())

    async def _make_room(self) -> None:
        """Before a checkpoint: learn what the last step added, and evict so that it fits
        again under :attr:`memory_limit`."""
        held = await asyncio.to_thread(self.measure_memory)
        if self._held_after is not None:
            self._step_growth = max(0, held - self._held_after)
        await self.account_memory(reserve=self._step_growth, held=held)

    async def account_memory(self, reserve: int = 0, *, held: int | None = None) -> int:
        """Measure the memory the checkpoints hold (or take ``held``), evict the oldest
        while it is over :attr:`memory_limit` less ``reserve``; return the bytes held then."""
        if held is None:
            held = await asyncio.to_thread(self.measure_memory)
        limit = self.memory_limit
        while limit is not None and held + reserve > limit and self._held:
            key = next(iter(self._held))
            self.drop(key)
            room = f" (and {reserve} for the next step)" if reserve else ""
            self.lost[key] = (
                f"evicted: checkpoints held {held} bytes{room}, over the limit of {limit} bytes"
            )
            held = await asyncio.to_thread(self.measure_memory)
        return held

    # -- the end ---------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """End the kernel, every checkpoint, and what they started."""
        self._closed = True
        if self._accounting is not None and not self._accounting.done():
            self._accounting.cancel()
            with contextlib.suppress(BaseException):
                await self._accounting
        if self._acceptor is not None:
            acceptor, self._acceptor = self._acceptor, None
            # asyncio.wait_for (Python 3.11) loses a cancel that lands as a hello completes:
            # cancel until the acceptor has ended (it also stops by itself once closed).
            while not acceptor.done():
                acceptor.cancel()
                await asyncio.wait({acceptor}, timeout=1.0)
            with contextlib.suppress(BaseException):
                acceptor.result()
        try:
            await self._stop_current()
        finally:
            for key in list(self._held):
                self.drop(key)
            for taken in self._retired:
                taken.close()
            self._retired.clear()
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            if self._workdir is not None:
                self._workdir.remove()
                self._workdir = None
            if self._own_context:
                with contextlib.suppress(Exception):
                    self._context.destroy(linger=0)

    # -- helpers ---------------------------------------------------------------------------

    async def _stop_current(self) -> None:
        try:
            await self.kernel.stop(now=True)
        finally:
            parent, self._parent = self._parent, None
            if parent is not None and parent in self._retired:
                self._retired.remove(parent)
                parent.close()

    def _listen(self) -> str:
        """The address of this object's Unix socket, where checkpoints say hello (made, and
        served, on first use)."""
        if self._listener is None or self._workdir is None:
            self._workdir = make_workdir()
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(self._workdir.path / "c"))
            listener.listen(16)
            listener.setblocking(False)
            self._listener = listener
            self._acceptor = asyncio.get_running_loop().create_task(self._accept(listener))
        return str(self._workdir.path / "c")

    async def _reply(self, msg_id: str) -> dict[str, Any]:
        """The shell reply to ``msg_id`` (other replies are skipped, as cells skip ours)."""
        from queue import Empty

        ends = time.monotonic() + CHECKPOINT_TIMEOUT
        client = self.kernel.client
        while (left := ends - time.monotonic()) > 0:
            try:
                msg = await client.shell_channel.get_msg(timeout=min(left, 1.0))
            except Empty:
                if not await self.kernel.manager.is_alive():
                    raise CheckpointError("the kernel died while taking a checkpoint") from None
                continue
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return dict(msg)
        raise CheckpointError(f"the kernel did not answer within {CHECKPOINT_TIMEOUT:g} s")

    async def _accept(self, listener: socket.socket) -> None:
        """Take each checkpoint's hello, and hand it to the checkpoint that waits for it."""
        loop = asyncio.get_running_loop()
        while not self._closed:
            connection, _ = await loop.sock_accept(listener)
            try:
                said = await asyncio.wait_for(hello(loop, connection), CHECKPOINT_TIMEOUT)
                key, pid = int(said["key"]), int(said["pid"])
                taken = Checkpoint(key, pid, connection, self._kernel_ids)
            except (asyncio.TimeoutError, TimeoutError, OSError, ValueError, TypeError, KeyError):
                connection.close()
                continue
            waiting = self._held.get(key)
            if self._closed or isinstance(waiting, Checkpoint) or waiting is None or waiting.done():
                taken.close()  # dropped before it said hello
                continue
            try:
                taken.workdir = make_workdir()
                taken.workdir.record_session(taken.pid, taken.kernel_ids)
            except OSError as exc:
                logger.debug("could not record checkpoint %s's session: %s", key, exc)
            waiting.set_result(taken)
            self._held[key] = taken
