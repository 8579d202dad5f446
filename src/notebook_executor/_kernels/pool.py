"""Warm kernels: started, connected and ready before a run asks, one fresh process per run.

A :class:`KernelPool` lives on a private event loop (:class:`KernelLoop`, one thread per engine)
where every kernel of the engine is started, used and stopped, so kernels and their zmq sockets
never cross event loops. The pool keeps up to ``size`` ready kernels for the run environment
used last (kernel name, cwd, environment); a run takes one that matches exactly, or one still
starting, or starts its own. A kernel is never handed to a second run: after its run it is
stopped in the background and the pool starts a new one.

The words used here, one per thing that happens (the transitions of the pool's state are drawn
in :class:`KernelPool`):

- **prepare**: spawn the *first template*, a process that imports ipykernel alone, before any run
  is known (the command line does, while it reads and checks its run); the first kernel is then
  forked from it. Unprepared, the pool spawns the template its first kernel needs when asked
  for it (the full one for a notebook that imports its data modules).
- **acquire** / **release**: a run takes its kernel / gives it back (it is then stopped).
- **prestart**: start the kernel of a run that is checked and about to acquire it. A second
  run announced so before the first has taken its kernel is a *sweep* (``execute_many``): the
  full template is spawned at once and every native kernel waits for it rather than being
  launched (a launch costs about as much CPU as the whole template, for one run).
- **fill**: start kernels until one is ready or on its way, for the latest environment, or
  ``size`` once a run found none ready (runs come faster than one kernel is replaced; a sweep
  keeps ``size``, no more than the runs still to come). The pool fills only once the engine
  has run something (a one-shot command pays for nothing it does not use), from the *full
  template* (ipykernel and the common data modules, spawned when first needed) where the
  platform allows forking, which costs a small fraction of a launch; until a run's notebook
  imports a module outside the standard library, from the first one (the full template would
  cost about ten kernels' CPU, and save those kernels nothing).
- **speculate**: start a kernel, once prepared, for a run that may come (the run server's next
  child, for the environment of the run before it); taken only by a run it matches exactly.
- **warm up**: a kernel started before any run waits for it also runs a silent ``pass``.
- **sweep stale**: at the pool's first action and at its close, in the background, what killed
  hosts left (kernel folders, and what is left of their kernels' sessions) is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict, deque
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._types import TIMEOUTS
from ..engine import KernelChoice
from .launch import RunningKernel
from .options import is_own_interpreter
from .pool_starts import KernelStarts, PoolState
from .workdirs import sweep_stale

if TYPE_CHECKING:
    from .forkserver import ForkServer

__all__ = ["DEFAULT_WARM_KERNELS", "KernelPool", "PoolState"]

logger = logging.getLogger(__name__)

#: Ready kernels an engine keeps by default.
DEFAULT_WARM_KERNELS = 2

#: Pause between the end of an engine's first run and the first fill of the pool.
FIRST_FILL_DELAY = 0.3

#: Pause between the end of a run and the stop of its kernel and the fill of the pool, so
#: that the caller's own finishing work (run records, catalog) does not compete with them.
SETTLE_DELAY = 0.05

#: Longest a pooled kernel may take to start in the background.
POOL_READY_TIMEOUT = TIMEOUTS.template_start


@dataclass(frozen=True)
class _Key:
    name: str
    native: bool
    #: The Python the kernel runs: a notebook's own environment's is another kernel.
    interpreter: str | None
    cwd: str
    env: tuple[tuple[str, str], ...]


def _key(choice: KernelChoice, cwd: Path, env: dict[str, str]) -> _Key:
    return _Key(
        choice.name, choice.native, choice.interpreter, str(cwd), tuple(sorted(env.items()))
    )


class KernelPool:
    """Ready kernels keyed by what a run needs; every method runs on the engine's loop.

    Its state (:class:`PoolState`) changes only by these transitions:

    =============== ============ ============================================ ==========
    from            verb         triggered by                                 to
    =============== ============ ============================================ ==========
    IDLE            prepare()    the command line, the pytest plugin,         PREPARED
                                 ``NotebookExecutor.prepare_kernel()``
    IDLE, PREPARED  acquire()    the first run asking for its kernel          FIRST_RUN
    IDLE, PREPARED, prestart()   a second run announced before the first      WARM
    FIRST_RUN                    has taken its kernel (a sweep)
    FIRST_RUN       acquire()    a second run before the first ended (sweep)  WARM
    FIRST_RUN       release()    the end of the first run                     WARM
    WARM            acquire()    every later run                              WARM
    WARM            release()    the end of every later run                   WARM
    any             close()      ``KernelEngine.close()``                     CLOSED
    =============== ============ ============================================ ==========

    What each does:

    - ``prepare()`` spawns the first template (where kernels can be forked; else the state
      stays IDLE).
    - ``acquire()`` takes a matching kernel that is ready or on its way (prestarted or warm),
      else starts one for the waiting run. Before WARM, kernels fork from the template
      prepared (or adopted) once it is ready, waiting for it; with none, the template the run
      needs is spawned then and waited for (the full one when its notebook imports a module
      that one preloads, else the first one): it is ready sooner than a launch, for less CPU;
      in WARM, from the full template, and until it is ready (outside a sweep) from the first
      one, when there is one and it is ready, instead of launching or waiting; until a run's
      notebook imports beyond the standard library, from the first one alone. In WARM a run
      that finds no kernel ready also fills the pool at once: runs come faster than the pool
      fills.
    - ``release()`` stops the run's kernel in the background (at once if it was left running a
      cell) and fills the pool after a pause. Leaving FIRST_RUN, the kernel is asked to stop at
      once and the fill waits :data:`FIRST_FILL_DELAY`: a one-shot caller (the command line)
      closes meanwhile and starts nothing it would not use; so it is at the end of a sweep
      (``execute_many`` returns, the caller may close). Otherwise in WARM, both wait
      :data:`SETTLE_DELAY`, so the caller's own finishing work goes first.
    - ``prestart()`` (any state but CLOSED) starts the kernel of a checked run about to
      acquire it, unless one is on its way. It also counts the runs announced and not yet
      served: from the second on, the pool is in a *sweep*: it turns WARM (the caller is not
      one-shot), spawns the full template at once (when the notebook imports beyond the
      standard library), drops the kernels being launched that no
      run has taken yet, and fills. During a sweep native kernels wait for the full template
      instead of being launched meanwhile, a run taking its kernel fills at once (the next
      runs are known), and the pool keeps no more kernels on their way than runs are still
      announced. The sweep ends with the release of its last run, when no run is running and
      none announced for the latest environment is left (runs announced for another one that
      never came are forgotten then). Runs announced for the latest environment that never
      come (a sweep cut short) keep the sweep going, with at most that many kernels on their
      way; every run still gets a fresh kernel.

    Forking is given up for the pool's life (kernels are launched) once a template cannot be
    spawned or fails to start; that is a fallback, not a state.

    Parameters
    ----------
    size : int
        Ready kernels to keep for the most recent run environment; 0 keeps none.
    fork : bool
        Fork kernels from a template process where possible.
    """

    def __init__(self, size: int, *, fork: bool) -> None:
        self.size = size
        #: Kernels kept ready outside a sweep: one until a run finds none ready (runs come
        #: faster than one kernel is replaced), then ``size``. A caller whose runs come apart
        #: (an agent, a served command, a test) never pays for a second kernel it would not
        #: use (each costs 50-60 ms of CPU to start and stop): in the integration tests, 184 of
        #: 427 kernels started were never used, 67 pools leaving about 2.7 each at close.
        self.ahead = min(size, 1)
        self.state = PoolState.IDLE
        self._idle: OrderedDict[_Key, deque[asyncio.Task[RunningKernel]]] = OrderedDict()
        self._recent: tuple[_Key, KernelChoice, Path, dict[str, str]] | None = None
        #: Runs announced by :meth:`prestart` that have not acquired their kernel yet.
        self._announced: dict[_Key, int] = {}
        #: True once several runs were announced at once: kernels wait for the full template.
        self.sweep = False
        #: Runs between acquire() and release().
        self._running = 0
        self._background: set[asyncio.Task[Any]] = set()
        #: Set by :meth:`close`: kernels waiting to be stopped are stopped now.
        self._closing = asyncio.Event()
        self._swept = False
        #: How the kernels of this pool were started, for tests and benchmarks.
        #: Counts: kernels taken warm or started for a waiting run, forked or launched; and of
        #: the used kernels asked to shut down, those that exited and those killed after
        #: the grace period; templates replaced after their process died.
        self.stats = {
            "taken_warm": 0,
            "started_cold": 0,
            "forked": 0,
            "launched": 0,
            "exited": 0,
            "killed": 0,
            "templates_renewed": 0,
        }
        #: How kernels start: the templates they fork from, or a launch.
        self.starts = KernelStarts(self, fork=fork, stats=self.stats)

    # -- transitions -----------------------------------------------------------------------

    def prepare(self) -> None:
        """IDLE -> PREPARED: spawn the first template, before anyone knows what it will run.

        The template imports ipykernel (no kernel, no sockets, nothing of any run): the first
        native kernel is then forked from it instead of launched, which saves the caller the
        import time it spends meanwhile, reading and checking its run.
        """
        if self.state is not PoolState.IDLE:
            return
        self._sweep_stale()
        self.starts.first = self.starts.spawn_template(data_modules=False)
        if self.starts.first is not None:
            self.state = PoolState.PREPARED

    async def acquire(
        self,
        choice: KernelChoice,
        cwd: Path,
        env: dict[str, str],
        ready_timeout: float,
        *,
        data: bool = True,
        data_modules: bool = False,
    ) -> RunningKernel:
        """-> FIRST_RUN or WARM: a ready kernel for one run, warm if one matches, else new
        (``data``: the run's notebook imports modules outside the standard library;
        ``data_modules``: among them one the full template preloads)."""
        self._sweep_stale()
        self.starts.wanted(data, data_modules)
        key = _key(choice, cwd, env)
        if self.sweep:
            self._announced[key] = max(0, self._announced.get(key, 0) - 1)
        else:
            # Outside a sweep a run takes what was announced for it (at most one kernel).
            self._announced.pop(key, None)
        first = self.state in (PoolState.IDLE, PoolState.PREPARED)
        if first:
            self.state = PoolState.FIRST_RUN
        elif self.state is PoolState.FIRST_RUN:
            self.state = PoolState.WARM
        self._recent = (key, choice, cwd, env)
        if key in self._idle:
            self._idle.move_to_end(key)
        kernel = await self._take(key, ready_timeout)
        if kernel is not None:
            self.stats["taken_warm"] += 1
        else:
            if not first:
                self.ahead = self.size
                # Runs come faster than the pool fills (a sweep): start the next ones now.
                # After the first run, filling waits for the end of this run, not to slow it.
                self._fill()
            self.stats["started_cold"] += 1
            kernel = await self.starts.start(
                choice, cwd, env, ready_timeout, warm_up=False, wait=False
            )
        self._running += 1
        return kernel

    def release(self, kernel: RunningKernel, *, clean: bool) -> None:
        """FIRST_RUN or WARM -> WARM: stop a used kernel in the background, then fill."""
        one_shot = self.state is PoolState.FIRST_RUN
        if one_shot:
            self.state = PoolState.WARM
        self._running = max(0, self._running - 1)
        left = 0 if self._recent is None else self._announced.get(self._recent[0], 0)
        swept = self.sweep and not self._running and not left
        if swept:
            # The sweep's last run is over (runs announced for other environments that never
            # came are forgotten with it): from now on the pool keeps ``size`` kernels ready.
            self.sweep = False
            self._announced.clear()
        # A kernel left running a cell (timeout, cancel) is killed at once. A clean one is asked
        # to shut down after the caller has had its moment (its run records, its answer), or as
        # soon as the pool closes, whichever comes first: a caller that closes right after (the
        # command line, the run server's child once it has answered) waits for the kernel to
        # go, and its stop no longer competes with the run's last steps (served runs of
        # notebooks/hello.py, 2 CPUs, idle, 30 of each way interleaved: medians 109.0 ms with
        # the stop at once, 103.9 ms so; back to back 121.8 and 115.0 ms).
        settle = SETTLE_DELAY if clean else 0.0
        self._spawn(self._stop(kernel, now=not clean, after=settle))
        # Such a caller closes right after: give it the time to do so before starting kernels
        # it would never use (and close() would have to kill half-started).
        delay = FIRST_FILL_DELAY if one_shot or swept else SETTLE_DELAY
        asyncio.get_running_loop().call_later(delay, self._fill)

    async def template(
        self,
        env: dict[str, str],
        cwd: Path,
        interpreter: str | None = None,
        *,
        data: bool = True,
        data_modules: bool = False,
    ) -> ForkServer | None:
        """The template a kernel of the pool's own (a session's) forks from, or None to launch.

        Before WARM, the template prepared, or else the one its notebook needs, spawned now,
        waited for (as for a run's first kernel: the full one when ``data_modules``); in WARM,
        the full template when it is ready, else the first one. For another ``interpreter`` (a
        notebook's own environment), that environment's template. The pool's state and kernels
        stay as they are (``data``, ``data_modules``: as for :meth:`acquire`).
        """
        starts = self.starts
        if not starts.fork or self.state is PoolState.CLOSED:
            return None
        self._sweep_stale()
        starts.wanted(data, data_modules)
        starts.renew_dead()
        if not is_own_interpreter(interpreter):
            return await starts.environment_template(str(interpreter), env, cwd)
        if self.state is not PoolState.WARM:
            return await starts.template_for(env, cwd, wait=True)
        server = await starts.template_for(env, cwd, wait=starts.first is None)
        if server is not None:
            return server
        if starts.first is None:
            return None
        return await starts.usable(starts.first, env, cwd, wait=True)

    async def close(self) -> None:
        """-> CLOSED: stop every kernel, pending start and template; wait until they are gone."""
        self.state = PoolState.CLOSED
        self._closing.set()
        # Meanwhile, remove the kernel folders that hosts killed outright left behind.
        sweep = asyncio.get_running_loop().create_task(asyncio.to_thread(sweep_stale))
        idle = [task for entries in self._idle.values() for task in entries]
        self._idle.clear()
        for task in idle:
            self._discard(task)
        self.starts.cancel_templates()
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        await self.starts.close()
        try:
            swept = await sweep
        except Exception as exc:
            logger.debug("could not sweep stale kernel folders: %s", exc)
        else:
            if swept:
                logger.info("removed %d kernel folders left by killed hosts", len(swept))

    # -- actions that leave the state as it is ---------------------------------------------

    def prestart(
        self,
        choice: KernelChoice,
        cwd: Path,
        env: dict[str, str],
        *,
        data: bool = True,
        data_modules: bool = False,
    ) -> None:
        """Start a kernel for a run that is about to ask for one, unless one is on its way
        (``data``, ``data_modules``: as for :meth:`acquire`)."""
        if self.state is PoolState.CLOSED:
            return
        self._sweep_stale()
        self.starts.wanted(data, data_modules)
        key = _key(choice, cwd, env)
        self._announced[key] = self._announced.get(key, 0) + 1
        if self._announced[key] > 1 and not self.sweep:
            self._begin_sweep(key, choice, cwd, env)
            return
        entries = self._idle.setdefault(key, deque())
        if entries:
            return
        task = asyncio.get_running_loop().create_task(
            self.starts.start(choice, cwd, env, POOL_READY_TIMEOUT, warm_up=True, wait=False)
        )
        task.add_done_callback(_ignore_result)
        entries.append(task)

    async def speculate(self, choice: KernelChoice, cwd: Path, env: dict[str, str]) -> None:
        """PREPARED: start a kernel for a run that may come, no run announced yet.

        The run server's next child does, for the kernel of the run before it: a run whose
        kernel matches exactly (name, folder, whole environment) takes it, as it would take a
        warm kernel; any other leaves it to :meth:`close`. Only a kernel forked from the
        template is worth the guess: none is launched for it.
        """
        if self.state is not PoolState.PREPARED or not choice.native:
            return
        if is_own_interpreter(choice.interpreter):
            if await self.starts.template_for(env, cwd, wait=True) is None:
                return
        else:
            # A notebook's own environment: only from a template this process adopted (the
            # run server's), never one spawned for a guess.
            from .shared_template import adopted

            interpreter = str(choice.interpreter)
            if adopted(interpreter=interpreter) is None:
                return
            if await self.starts.environment_template(interpreter, env, cwd) is None:
                return
        entries = self._idle.setdefault(_key(choice, cwd, env), deque())
        if entries or self.state is not PoolState.PREPARED:
            return
        task = asyncio.get_running_loop().create_task(
            self.starts.start(choice, cwd, env, POOL_READY_TIMEOUT, warm_up=True, wait=False)
        )
        task.add_done_callback(_ignore_result)
        entries.append(task)

    def _begin_sweep(self, key: _Key, choice: KernelChoice, cwd: Path, env: dict[str, str]) -> None:
        """-> WARM: several runs are coming; serve them from the full template, now."""
        self.sweep = True
        self.state = PoolState.WARM
        self._recent = (key, choice, cwd, env)
        own = is_own_interpreter(choice.interpreter)
        starts = self.starts
        if starts.fork and starts.full is None and own and starts.data_wanted:
            # (A notebook's own environment has its template: see environment_template.)
            starts.full = starts.spawn_template(data_modules=True)
        if starts.fork:
            # A kernel being launched for a run that has not taken it yet costs more CPU than
            # the template, which every later kernel now shares: drop it.
            entries = self._idle.get(key, deque())
            for task in [t for t in entries if t in starts.launching and not t.done()]:
                entries.remove(task)
                self._discard(task)
        self._fill()

    def _fill(self) -> None:
        """Start kernels for the latest environment until :attr:`ahead` (a sweep: ``size``, at
        most one per run still to come) are ready or on their way."""
        if self.state is PoolState.CLOSED or self.size <= 0 or self._recent is None:
            return
        key, choice, cwd, env = self._recent
        entries = self._idle.setdefault(key, deque())
        self._idle.move_to_end(key)
        # In a sweep, no more kernels than runs still to come: none is left over at its end.
        wanted = min(self.size, self._announced.get(key, 0)) if self.sweep else self.ahead
        while len(entries) < wanted:
            if sum(len(e) for e in self._idle.values()) >= self.size and not self._evict(key):
                break
            # The first kernel does not wait for the full template to be ready (it is forked
            # from the first template meanwhile, else launched); the next ones do, unless the
            # first template is ready to fork them.
            task = asyncio.get_running_loop().create_task(
                self.starts.start(
                    choice, cwd, env, POOL_READY_TIMEOUT, warm_up=True, wait=bool(entries)
                )
            )
            # A start nobody takes is still reaped: retrieve its exception.
            task.add_done_callback(_ignore_result)
            entries.append(task)

    # -- internals -------------------------------------------------------------------------

    def _sweep_stale(self) -> None:
        """Once, at the pool's first action: kill what the kernels of killed hosts left
        running and remove their folders, in a thread (off the run's way)."""
        if self._swept:
            return
        self._swept = True

        async def sweep() -> None:
            try:
                await asyncio.to_thread(sweep_stale)
            except Exception as exc:
                logger.debug("could not sweep stale kernel folders: %s", exc)

        self._spawn(sweep())

    async def _take(self, key: _Key, ready_timeout: float) -> RunningKernel | None:
        entries = self._idle.get(key)
        while entries:
            task = next((t for t in entries if t.done()), entries[0])
            entries.remove(task)
            if not task.done() and self.state is PoolState.WARM:
                self.ahead = self.size  # this run waits for its kernel: keep more ready
            if self.sweep or (self.ahead > 1 and not entries):
                # The next runs are already known (a sweep), or come back to back and this
                # run takes the last kernel: start the next ones now, not when this run ends,
                # so that the pool never runs dry between them. (``pytest --notebooks``, 20
                # small notebooks one after the other: after the release's settle delay,
                # every third run waited 45-280 ms for a kernel started only as the run
                # before it ended.) Not while a kernel is left: a start competes with this
                # run for the CPU (warm runs 0.5 s apart after a burst: 11.7 -> 17.3 ms).
                asyncio.get_running_loop().call_soon(self._fill)
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
        if after > 0 and self.state is not PoolState.CLOSED:
            # close() waits for this task, and ends the wait: the kernel is stopped either way.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._closing.wait(), after)
        try:
            exited = await kernel.stop(now=now, closing=self.state is PoolState.CLOSED)
            if not now:
                self.stats["exited" if exited else "killed"] += 1
        except Exception as exc:
            logger.warning("could not stop a kernel cleanly: %s", exc)


def _ignore_result(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
