"""Warm kernels: started, connected and ready before a run asks, one fresh process per run.

A :class:`KernelPool` lives on a private event loop (:class:`KernelLoop`, one thread per engine)
where every kernel of the engine is started, used and stopped, so kernels and their zmq sockets
never cross event loops. The pool keeps up to ``size`` ready kernels for the run environment
used last (kernel name, cwd, environment); a run takes one that matches exactly, or one still
starting, or starts its own. A kernel is never handed to a second run: after its run it is
stopped in the background and the pool starts a new one.

The pool starts filling only once the engine has run something (a one-shot command pays for
nothing it does not use), and from then on new kernels are forked from a template process
(:mod:`.forkserver`) where the platform allows it, which costs a small fraction of a launch.
A caller that knows a run is coming (the command line) may :meth:`KernelPool.anticipate` it:
a lighter template, of ipykernel alone, then imports while the caller reads and checks the
run, and the first kernel is forked from it once the run is known to be good.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..engine import KernelChoice
from .launch import RunningKernel, kernel_environment, start_kernel
from .workdirs import sweep_stale

if TYPE_CHECKING:
    from .forkserver import ForkServer

__all__ = ["DEFAULT_WARM_KERNELS", "KernelLoop", "KernelPool"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Ready kernels an engine keeps by default.
DEFAULT_WARM_KERNELS = 2

#: Pause between the end of an engine's first run and the first warm kernel start.
FIRST_REFILL_DELAY = 0.3

#: Pause between the end of a run and the stop of its kernel and the refill of the pool, so
#: that the caller's own finishing work (run files, catalog) does not compete with them.
SETTLE_DELAY = 0.05

#: Longest a pooled kernel may take to start in the background.
POOL_READY_TIMEOUT = 120.0


class KernelLoop:
    """An asyncio event loop running in a thread of its own, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """True while the loop thread runs."""
        return self._thread is not None

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop; return a future for its result."""
        with self._lock:
            if self._loop is None:
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(
                    target=serve, name="notebook-executor-kernels", daemon=True
                )
                self._thread.start()
                ready.wait()
                self._loop = loop
            return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def stop(self) -> None:
        """Stop the loop and join its thread; the loop must have no work left."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


@dataclass(frozen=True)
class _Key:
    name: str
    native: bool
    cwd: str
    env: tuple[tuple[str, str], ...]


class KernelPool:
    """Ready kernels keyed by what a run needs; every method runs on the engine's loop.

    Parameters
    ----------
    size : int
        Ready kernels to keep for the most recent run environment; 0 keeps none.
    fork : bool
        Fork kernels from a template process where possible.
    """

    def __init__(self, size: int, *, fork: bool) -> None:
        self.size = size
        self._fork = fork
        self._idle: OrderedDict[_Key, deque[asyncio.Task[RunningKernel]]] = OrderedDict()
        self._recent: tuple[_Key, KernelChoice, Path, dict[str, str]] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._server: ForkServer | None = None
        self._server_ready: asyncio.Task[None] | None = None
        #: A template of ipykernel alone, started by :meth:`anticipate` for the first kernel.
        self._first: ForkServer | None = None
        self._first_ready: asyncio.Task[None] | None = None
        self._context: Any = None
        self._acquired = 0
        self._released = 0
        self._closed = False
        #: How the kernels of this pool were started, for tests and benchmarks.
        #: Counts: kernels taken warm or started for a waiting run, forked or launched; and of
        #: the used kernels asked to shut down, those that exited and those killed after
        #: the grace period.
        self.stats = {
            "taken_warm": 0,
            "started_cold": 0,
            "forked": 0,
            "launched": 0,
            "exited": 0,
            "killed": 0,
        }

    # -- runs ------------------------------------------------------------------------------

    async def acquire(
        self, choice: KernelChoice, cwd: Path, env: dict[str, str], ready_timeout: float
    ) -> RunningKernel:
        """A ready kernel for one run: a warm one that matches, else a newly started one."""
        key = _Key(choice.name, choice.native, str(cwd), tuple(sorted(env.items())))
        self._acquired += 1
        self._recent = (key, choice, cwd, env)
        if key in self._idle:
            self._idle.move_to_end(key)
        kernel = await self._take(key, ready_timeout)
        if kernel is not None:
            self.stats["taken_warm"] += 1
        elif self._acquired > 1:
            # Runs come faster than the pool refills (a sweep): start the next ones now.
            # Otherwise refilling waits for the end of this run, so as not to slow it down.
            self._refill()
        if kernel is None:
            self.stats["started_cold"] += 1
            kernel = await self._start(choice, cwd, env, ready_timeout, ahead=False)
        return kernel

    def prestart(self, choice: KernelChoice, cwd: Path, env: dict[str, str]) -> None:
        """Start a kernel for a run that is about to ask for one, unless one is on its way."""
        if self._closed:
            return
        key = _Key(choice.name, choice.native, str(cwd), tuple(sorted(env.items())))
        entries = self._idle.setdefault(key, deque())
        if entries:
            return
        task = asyncio.get_running_loop().create_task(
            self._start(choice, cwd, env, POOL_READY_TIMEOUT)
        )
        task.add_done_callback(_ignore_result)
        entries.append(task)

    def anticipate(self) -> None:
        """Get ready to start the first kernel sooner, before anyone knows what it will run.

        Starts a template process that imports ipykernel (no kernel, no sockets, nothing of
        any run): the first native kernel is then forked from it instead of launched, which
        saves the caller the import time it spends meanwhile, reading and checking its run.
        """
        if self._closed or self._first is not None or self._server is not None:
            return
        server = self._new_server(data_modules=False)
        if server is not None:
            self._first = server
            self._first_ready = asyncio.get_running_loop().create_task(
                asyncio.to_thread(server.wait_ready)
            )

    def release(self, kernel: RunningKernel, *, clean: bool) -> None:
        """Stop a used kernel in the background (it never serves another run), then refill."""
        self._released += 1
        one_shot = self._released == 1 and self._acquired == 1
        # A kernel left running a cell (timeout, cancel) is killed at once. A clean one is asked
        # to shut down, after the caller has had its moment, unless this may be a one-shot
        # caller (the command line): it waits for the kernel to go, so the sooner the better.
        settle = SETTLE_DELAY if clean and not one_shot else 0.0
        self._spawn(self._stop(kernel, now=not clean, after=settle))
        if one_shot:
            # A one-shot caller closes right after its run: give it the time to do so before
            # starting kernels it would never use.
            asyncio.get_running_loop().call_later(FIRST_REFILL_DELAY, self._refill)
        else:
            asyncio.get_running_loop().call_later(SETTLE_DELAY, self._refill)

    async def close(self) -> None:
        """Stop every kernel, pending start and the fork server; wait until they are gone."""
        self._closed = True
        # Meanwhile, remove the kernel folders that hosts killed outright left behind.
        sweep = asyncio.get_running_loop().create_task(asyncio.to_thread(sweep_stale))
        idle = [task for entries in self._idle.values() for task in entries]
        self._idle.clear()
        for task in idle:
            self._discard(task)
        for ready in (self._server_ready, self._first_ready):
            if ready is not None:
                ready.cancel()
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        for server in (self._server, self._first):
            if server is not None:
                await asyncio.get_running_loop().run_in_executor(None, server.close)
        self._server = self._first = None
        if self._context is not None:
            self._context.destroy(linger=0)
            self._context = None
        try:
            swept = await sweep
        except Exception as exc:
            logger.debug("could not sweep stale kernel folders: %s", exc)
        else:
            if swept:
                logger.info("removed %d kernel folders left by killed hosts", len(swept))

    # -- internals -------------------------------------------------------------------------

    async def _take(self, key: _Key, ready_timeout: float) -> RunningKernel | None:
        entries = self._idle.get(key)
        while entries:
            task = next((t for t in entries if t.done()), entries[0])
            entries.remove(task)
            try:
                kernel = await asyncio.wait_for(asyncio.shield(task), timeout=ready_timeout)
            except asyncio.CancelledError:
                if not task.done():
                    entries.appendleft(task)
                raise
            except (asyncio.TimeoutError, TimeoutError):
                self._discard(task)
                raise
            except Exception as exc:
                logger.debug("a warm kernel failed to start: %s", exc)
                continue
            if await kernel.manager.is_alive():
                return kernel
            self._spawn(self._stop(kernel, now=True))
        return None

    def _refill(self) -> None:
        if self._closed or self.size <= 0 or self._recent is None:
            return
        key, choice, cwd, env = self._recent
        entries = self._idle.setdefault(key, deque())
        self._idle.move_to_end(key)
        while len(entries) < self.size:
            if sum(len(e) for e in self._idle.values()) >= self.size and not self._evict(key):
                break
            task = asyncio.get_running_loop().create_task(
                self._start(choice, cwd, env, POOL_READY_TIMEOUT, warm=bool(entries))
            )
            # A start nobody takes is still reaped: retrieve its exception.
            task.add_done_callback(_ignore_result)
            entries.append(task)

    def _evict(self, keep: _Key) -> bool:
        for key, entries in self._idle.items():
            if key != keep and entries:
                self._discard(entries.popleft())
                if not entries:
                    del self._idle[key]
                return True
        return False

    def _discard(self, task: asyncio.Task[RunningKernel]) -> None:
        """Stop the kernel a pool task started or is starting."""

        async def discard() -> None:
            if not task.done():
                task.cancel()
            with contextlib.suppress(BaseException):
                kernel = await task
                await self._stop(kernel, now=True)

        self._spawn(discard())

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _stop(self, kernel: RunningKernel, *, now: bool, after: float = 0.0) -> None:
        if after > 0 and not self._closed:
            # close() waits for this task, so the kernel is stopped either way.
            await asyncio.sleep(after)
        try:
            exited = await kernel.stop(now=now)
            if not now:
                self.stats["exited" if exited else "killed"] += 1
        except Exception as exc:
            logger.warning("could not stop a kernel cleanly: %s", exc)

    async def _start(
        self,
        choice: KernelChoice,
        cwd: Path,
        env: dict[str, str],
        ready_timeout: float,
        *,
        warm: bool = False,
        ahead: bool = True,
    ) -> RunningKernel:
        """Start a kernel; ``ahead`` when no run is waiting for it (it then warms up too)."""
        server = await self._fork_server(env, cwd, wait=warm) if choice.native else None
        if self._context is None:
            import zmq
            import zmq.asyncio

            self._context = zmq.asyncio.Context()
            # Kernels bind their IPC sockets a moment after we connect: retry quickly.
            self._context.setsockopt(zmq.RECONNECT_IVL, 10)
            self._context.setsockopt(zmq.LINGER, 0)
            # No high-water mark on our side of IOPub either: a queue that fills drops output.
            self._context.setsockopt(zmq.RCVHWM, 0)
        kernel = await start_kernel(
            choice,
            cwd=cwd,
            env=env,
            ready_timeout=ready_timeout,
            forkserver=server,
            context=self._context,
            warm_up=ahead,
        )
        self.stats["forked" if server is not None else "launched"] += 1
        return kernel

    async def _fork_server(
        self, env: dict[str, str], cwd: Path, *, wait: bool
    ) -> ForkServer | None:
        """The fork server when it can fork for ``env``; starts it after the first run."""
        if not self._fork or self._closed:
            return None
        if self._server is None:
            if self._released < 1 and self._acquired < 2:
                # The first run starts its kernel the ordinary way, or from the template of
                # :meth:`anticipate`, started earlier than any launch could be: wait for it.
                # The template of the warm kernels comes after it.
                if self._first is None or self._first_ready is None:
                    return None
                return await self._usable(self._first, self._first_ready, env, cwd, wait=True)
            self._server = self._new_server(data_modules=True)
            if self._server is None:
                return None
            self._server_ready = asyncio.get_running_loop().create_task(
                asyncio.to_thread(self._server.wait_ready)
            )
        assert self._server_ready is not None
        return await self._usable(self._server, self._server_ready, env, cwd, wait=wait)

    def _new_server(self, *, data_modules: bool) -> ForkServer | None:
        """A spawned template, or None where kernels cannot be forked."""
        from .forkserver import ForkServer, ForkServerError, fork_supported

        if not self._fork or not fork_supported():
            return None
        server = ForkServer(kernel_environment(None), data_modules=data_modules)
        # Spawned from the loop thread, which lives as long as the engine: the template's
        # parent-death signal is tied to the thread that created it.
        try:
            server.spawn()
        except (OSError, ForkServerError) as exc:
            logger.info("kernels will be launched, not forked: %s", exc)
            self._fork = False
            return None
        return server

    async def _usable(
        self,
        server: ForkServer,
        ready: asyncio.Task[None],
        env: dict[str, str],
        cwd: Path,
        *,
        wait: bool,
    ) -> ForkServer | None:
        """``server`` if it is ready (after waiting, with ``wait``) and can fork for ``env``."""
        if not ready.done() and wait:
            with contextlib.suppress(BaseException):
                await asyncio.shield(ready)
        if not ready.done():
            return None
        if ready.cancelled() or ready.exception() is not None:
            if self._fork:
                logger.info("kernels will be launched, not forked: %s", ready)
            self._fork = False
            return None
        return server if server.compatible(env, cwd) else None


def _ignore_result(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
