"""How a :class:`~notebook_executor._kernels.pool.KernelPool` starts one kernel: forked from
the template its state calls for, or launched; and the states that choose.

The pool holds a :class:`KernelStarts`, which owns the templates, and asks it for each kernel;
the starts ask the pool only for its state (:class:`PoolPhase`).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..engine import KernelChoice
from .launch import RunningKernel, client_context, start_kernel
from .options import is_own_interpreter
from .templates import Template, TemplateUnavailable, spawn_template

if TYPE_CHECKING:
    from .forkserver import ForkServer

__all__ = ["MAX_ENVIRONMENT_TEMPLATES", "KernelStarts", "PoolPhase", "PoolState"]

logger = logging.getLogger("notebook_executor._kernels.pool")

#: Templates of notebooks' own environments (docs/how-to/environments.md) a pool keeps, the most
#: recently
#: used; an older one is stopped when another is needed.
MAX_ENVIRONMENT_TEMPLATES = 3


class PoolState(enum.Enum):
    """Where a :class:`KernelPool` is in its life (transitions: see :class:`KernelPool`)."""

    #: Nothing started: no run yet, no template.
    IDLE = "idle"
    #: The first template imports ipykernel; no run known yet.
    PREPARED = "prepared"
    #: The first run has asked for its kernel; the caller may be one-shot (the command line).
    FIRST_RUN = "first run"
    #: The first run has ended or a second has begun: the pool keeps ``size`` kernels ready,
    #: forked from the full template (from the first one until a notebook imports beyond the
    #: standard library).
    WARM = "warm"
    #: Stopped, with every kernel and template; nothing starts any more.
    CLOSED = "closed"


class PoolPhase(Protocol):
    """What a start asks of its pool, each time (it changes while a start waits)."""

    @property
    def state(self) -> PoolState:
        """Where the pool is in its life."""

    @property
    def sweep(self) -> bool:
        """Whether several runs were announced at once: kernels wait for the full template."""


class KernelStarts:
    """How a :class:`~notebook_executor._kernels.pool.KernelPool` starts its kernels: forked
    from the template its state calls for, or launched. Owns the templates and the zmq
    context of the kernels' clients.

    Parameters
    ----------
    pool : PoolPhase
        The pool it starts kernels for, asked for its state.
    fork : bool
        Fork kernels from a template process where possible.
    stats : dict of str to int
        The pool's counts, to which it adds: ``forked``, ``launched``, ``templates_renewed``.
    """

    def __init__(self, pool: PoolPhase, *, fork: bool, stats: dict[str, int]) -> None:
        self._pool = pool
        #: False once a template could not be spawned or failed: kernels are launched.
        self.fork = fork
        self._stats = stats
        #: ipykernel alone, spawned by :meth:`KernelPool.prepare` for the kernels before WARM.
        self.first: Template | None = None
        #: ipykernel and the data modules, spawned in WARM when a kernel is first started
        #: once :attr:`data_wanted`.
        self.full: Template | None = None
        #: Whether a run's notebook imported a module outside the standard library (see
        #: :func:`~.kernel_engine.template_hints`): until then the first template serves every
        #: state.
        #: The full one costs about as much CPU as ten forked kernels (0.6-0.8 s) and saves
        #: nothing to kernels that import no data module: their fork from either costs 45-55 ms
        #: of CPU (measured 2026-11-27).
        self.data_wanted = False
        #: Whether a run's notebook imported a module the full template preloads (scrapbook,
        #: pandas, numpy, pyarrow): a pool with no template yet then spawns the full one for its
        #: first kernel, not the first one (see :meth:`template_for`).
        self.data_modules_wanted = False
        #: Templates running the interpreters of notebooks' own environments, least recent first.
        self.environments: dict[str, Template] = {}
        #: Tasks that are launching a kernel (not forking one), to drop in a sweep.
        self.launching: set[asyncio.Task[Any]] = set()
        self._context: Any = None

    def wanted(self, data: bool, data_modules: bool) -> None:
        """Note what a run's notebook imports (see :attr:`data_wanted`,
        :attr:`data_modules_wanted`)."""
        self.data_wanted |= data or data_modules
        self.data_modules_wanted |= data_modules

    def cancel_templates(self) -> None:
        """Stop waiting for any template to be ready (the pool is closing)."""
        for template in self._templates():
            template.ready.cancel()

    async def close(self) -> None:
        """Stop every template, waiting until each is gone, and the clients' zmq context."""
        templates = self._templates()
        self.first = self.full = None
        self.environments.clear()
        for template in templates:
            await asyncio.get_running_loop().run_in_executor(None, template.close)
        if self._context is not None:
            self._context.destroy(linger=0)
            self._context = None

    def _templates(self) -> list[Template]:
        templates = [t for t in (self.full, self.first) if t is not None]
        return templates + list(self.environments.values())

    async def start(
        self,
        choice: KernelChoice,
        cwd: Path,
        env: dict[str, str],
        ready_timeout: float,
        *,
        warm_up: bool,
        wait: bool,
    ) -> RunningKernel:
        """Start a kernel: forked from the template of the state (``wait``: for it to be
        ready) or launched; ``warm_up`` when no run waits for it.

        A template found dead as it is asked to fork is replaced, and the kernel forked from
        the new one; should that fail too, the kernel is launched.
        """
        from .forkserver import ForkServerError

        attempts = 2
        while True:
            attempts -= 1
            server = None
            if choice.native and attempts >= 0:
                if is_own_interpreter(choice.interpreter):
                    server = await self.template_for(env, cwd, wait=wait)
                else:
                    interpreter = str(choice.interpreter)
                    server = await self.environment_template(interpreter, env, cwd)
            task = asyncio.current_task()
            if server is None and task is not None:
                self.launching.add(task)
                task.add_done_callback(self.launching.discard)
            if self._context is None:
                self._context = client_context()
            try:
                kernel = await start_kernel(
                    choice,
                    cwd=cwd,
                    env=env,
                    ready_timeout=ready_timeout,
                    forkserver=server,
                    context=self._context,
                    warm_up=warm_up,
                )
            except ForkServerError as exc:
                if server is None:
                    raise
                logger.warning("the kernel template could not fork: %s", exc)
                self._renew(server)
                continue
            self._stats["forked" if server is not None else "launched"] += 1
            return kernel

    async def template_for(
        self, env: dict[str, str], cwd: Path, *, wait: bool
    ) -> ForkServer | None:
        """The template to fork a kernel for ``env`` from, or None to launch it."""
        if not self.fork or self._pool.state is PoolState.CLOSED:
            return None
        self.renew_dead()
        if self._pool.state is not PoolState.WARM:
            # Before WARM: the template prepared or adopted (another process's, ready or on its
            # way), waited for; with none, the one this run needs is spawned now and waited
            # for, which is ready sooner than a launched kernel and costs less CPU even for one
            # run (a launch imports ipykernel for itself). That is the full template when the
            # notebook imports one of its data modules: the run's kernel does not import them
            # itself, and later runs fork from it with no second template (a new executor's
            # first three runs of a notebook that glues a scrap: see
            # NotebookExecutor.prepare_kernel); else the first one, and the full one comes after.
            template = self.first if self.first is not None else self.full
            if template is None:
                from .shared_template import adopted

                if adopted(data_modules=False) is None and self.data_modules_wanted:
                    template = self.full = self.spawn_template(data_modules=True)
                else:
                    template = self.first = self.spawn_template(data_modules=False)
                if template is None:
                    return None
            return await self.usable(template, env, cwd, wait=True)
        if self.full is None and not self.data_wanted:
            # No run has imported a data module: the first template serves (spawned now if
            # there is none), waited for: it is ready sooner than a launched kernel would be.
            if self.first is None:
                self.first = self.spawn_template(data_modules=False)
                if self.first is None:
                    return None
            return await self.usable(self.first, env, cwd, wait=True)
        if self.full is None:
            self.full = self.spawn_template(data_modules=True)
            if self.full is None:
                return None
        # Until the full template is ready, the first one, when ready, forks the kernels that
        # would be launched or wait (outside a sweep): a fork from it costs a small fraction of
        # a launch, and no run waits for imports it may not need.
        first = self.first
        if first is not None and not _started(first):
            first = None
        # In a sweep, nothing is launched meanwhile: the template serves every run.
        wait = self._pool.sweep or (wait and first is None)
        server = await self.usable(self.full, env, cwd, wait=wait)
        if server is None and first is not None and not self.full.ready.done():
            server = await self.usable(first, env, cwd, wait=False)
        return server

    async def environment_template(
        self, interpreter: str, env: dict[str, str], cwd: Path
    ) -> ForkServer | None:
        """The template running ``interpreter`` (a notebook's own environment), spawned when
        first needed and waited for, or None to launch (a failed template is dropped; the
        pool's other templates are not given up)."""
        from .forkserver import fork_supported

        if not self.fork or self._pool.state is PoolState.CLOSED or not fork_supported():
            return None
        templates = self.environments
        template = templates.pop(interpreter, None)
        if template is None:
            try:
                template = spawn_template(data_modules=True, interpreter=interpreter)
            except TemplateUnavailable as exc:
                logger.info("kernels of %s will be launched, not forked: %s", interpreter, exc)
                return None
        templates[interpreter] = template
        while len(templates) > MAX_ENVIRONMENT_TEMPLATES:
            _close_template(templates.pop(next(iter(templates))))
        try:
            return await template.usable(env, cwd, wait=True)
        except TemplateUnavailable as exc:
            logger.info("kernels of %s will be launched, not forked: %s", interpreter, exc)
            if templates.get(interpreter) is template:
                del templates[interpreter]
            _close_template(template)
            return None

    def renew_dead(self) -> None:
        """Replace each template whose process has died (killed, crashed) by a new one."""
        for template in (self.first, self.full):
            if template is not None and template.dead:
                self._renew(template.server)

    def _renew(self, server: ForkServer) -> None:
        """Replace the template of ``server``, which failed to fork, by a new one of its kind
        (the full one is spawned again when next needed); the old one is closed (it went with
        its kernels: those the pool holds are found dead and dropped when taken)."""
        for attribute in ("first", "full"):
            template: Template | None = getattr(self, attribute)
            if template is None or template.server is not server:
                continue
            logger.warning("the kernel template (pid %s) is gone: starting a new one", template.pid)
            self._stats["templates_renewed"] += 1
            renewed = None
            if attribute == "first" and self._pool.state is not PoolState.WARM:
                # (In WARM the full template serves: it is spawned again when next needed.)
                renewed = self.spawn_template(data_modules=server.data_modules)
            setattr(self, attribute, renewed)
            asyncio.get_running_loop().run_in_executor(None, template.close)
        for interpreter, template in list(self.environments.items()):
            if template.server is server:
                # A notebook environment's template: spawned again when next needed.
                logger.warning("the kernel template of %s is gone: starting a new one", interpreter)
                self._stats["templates_renewed"] += 1
                del self.environments[interpreter]
                _close_template(template)

    def spawn_template(self, *, data_modules: bool) -> Template | None:
        """A spawned template, or None where kernels cannot be forked."""
        from .forkserver import fork_supported

        if not self.fork or not fork_supported():
            return None
        try:
            return spawn_template(data_modules=data_modules)
        except TemplateUnavailable as exc:
            logger.info("kernels will be launched, not forked: %s", exc)
            self.fork = False
            return None

    async def usable(
        self, template: Template, env: dict[str, str], cwd: Path, *, wait: bool
    ) -> ForkServer | None:
        """``template``'s server if it is ready (after waiting, with ``wait``) and can fork for
        ``env``."""
        try:
            return await template.usable(env, cwd, wait=wait)
        except TemplateUnavailable as exc:
            if getattr(template.server, "borrowed", False):
                # Another process's template that could not be had: this pool spawns its own
                # when it next needs one (shared_template.py no longer offers that one).
                logger.info("no kernel template was lent (%s): using this process's own", exc)
                for attribute in ("first", "full"):
                    if getattr(self, attribute) is template:
                        setattr(self, attribute, None)
                return None
            if self.fork:
                logger.info("kernels will be launched, not forked: %s", exc)
            self.fork = False
            return None


def _started(template: Template) -> bool:
    """Whether ``template`` has imported its modules (and not failed to)."""
    ready = template.ready
    return ready.done() and not ready.cancelled() and ready.exception() is None


def _close_template(template: Template) -> None:
    """Stop a template no longer used, off the loop (its close waits a moment for it)."""
    template.ready.cancel()
    asyncio.get_running_loop().run_in_executor(None, template.close)
