"""How a :class:`~notebook_executor._kernels.pool.KernelPool` starts one kernel: forked from
the template its state calls for, or launched; and the states that choose."""

from __future__ import annotations

import asyncio
import enum
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import KernelChoice
from .launch import RunningKernel, client_context, start_kernel
from .options import is_own_interpreter
from .templates import Template, TemplateUnavailable, spawn_template

if TYPE_CHECKING:
    from .forkserver import ForkServer

__all__ = ["MAX_ENVIRONMENT_TEMPLATES", "KernelStarts", "PoolState"]

logger = logging.getLogger("notebook_executor._kernels.pool")

#: Templates of notebooks' own environments (SPEC section 19) a pool keeps, the most recently
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
    #: forked from the full template.
    WARM = "warm"
    #: Stopped, with every kernel and template; nothing starts any more.
    CLOSED = "closed"


class KernelStarts:
    """The kernel starts of a :class:`~notebook_executor._kernels.pool.KernelPool`, which
    sets this state."""

    state: PoolState
    sweep: bool
    stats: dict[str, int]
    _fork: bool
    _launching: set[asyncio.Task[Any]]
    _first_template: Template | None
    _full_template: Template | None
    #: Templates running the interpreters of notebooks' own environments, least recent first.
    _environment_templates: dict[str, Template]
    _context: Any

    async def _start(
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
                    server = await self._template_for(env, cwd, wait=wait)
                else:
                    interpreter = str(choice.interpreter)
                    server = await self._environment_template(interpreter, env, cwd)
            task = asyncio.current_task()
            if server is None and task is not None:
                self._launching.add(task)
                task.add_done_callback(self._launching.discard)
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
            self.stats["forked" if server is not None else "launched"] += 1
            return kernel

    async def _template_for(
        self, env: dict[str, str], cwd: Path, *, wait: bool
    ) -> ForkServer | None:
        """The template to fork a kernel for ``env`` from, or None to launch it."""
        if not self._fork or self.state is PoolState.CLOSED:
            return None
        self._renew_dead()
        if self.state is not PoolState.WARM:
            # Before WARM: the first template, which started earlier than any launch could be,
            # so wait for it; without one, launch. The full template comes after.
            if self._first_template is None:
                return None
            return await self._usable(self._first_template, env, cwd, wait=True)
        if self._full_template is None:
            self._full_template = self._spawn_template(data_modules=True)
            if self._full_template is None:
                return None
        # Until the full template is ready, the first one, when ready, forks the kernels that
        # would be launched or wait (outside a sweep): a fork from it costs a small fraction of
        # a launch, and no run waits for imports it may not need.
        first = self._first_template
        if first is not None and not _started(first):
            first = None
        # In a sweep, nothing is launched meanwhile: the template serves every run.
        wait = self.sweep or (wait and first is None)
        server = await self._usable(self._full_template, env, cwd, wait=wait)
        if server is None and first is not None and not self._full_template.ready.done():
            server = await self._usable(first, env, cwd, wait=False)
        return server

    async def _environment_template(
        self, interpreter: str, env: dict[str, str], cwd: Path
    ) -> ForkServer | None:
        """The template running ``interpreter`` (a notebook's own environment), spawned when
        first needed and waited for, or None to launch (a failed template is dropped; the
        pool's other templates are not given up)."""
        from .forkserver import fork_supported

        if not self._fork or self.state is PoolState.CLOSED or not fork_supported():
            return None
        templates = self._environment_templates
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

    def _renew_dead(self) -> None:
        """Replace each template whose process has died (killed, crashed) by a new one."""
        for template in (self._first_template, self._full_template):
            if template is not None and template.dead:
                self._renew(template.server)

    def _renew(self, server: ForkServer) -> None:
        """Replace the template of ``server``, which failed to fork, by a new one of its kind
        (the full one is spawned again when next needed); the old one is closed (it went with
        its kernels: those the pool holds are found dead and dropped when taken)."""
        for attribute in ("_first_template", "_full_template"):
            template: Template | None = getattr(self, attribute)
            if template is None or template.server is not server:
                continue
            logger.warning("the kernel template (pid %s) is gone: starting a new one", template.pid)
            self.stats["templates_renewed"] += 1
            renewed = None
            if attribute == "_first_template" and self.state is not PoolState.WARM:
                # (In WARM the full template serves: it is spawned again when next needed.)
                renewed = self._spawn_template(data_modules=server.data_modules)
            setattr(self, attribute, renewed)
            asyncio.get_running_loop().run_in_executor(None, server.close)
        for interpreter, template in list(self._environment_templates.items()):
            if template.server is server:
                # A notebook environment's template: spawned again when next needed.
                logger.warning("the kernel template of %s is gone: starting a new one", interpreter)
                self.stats["templates_renewed"] += 1
                del self._environment_templates[interpreter]
                _close_template(template)

    def _spawn_template(self, *, data_modules: bool) -> Template | None:
        """A spawned template, or None where kernels cannot be forked."""
        from .forkserver import fork_supported

        if not self._fork or not fork_supported():
            return None
        try:
            return spawn_template(data_modules=data_modules)
        except TemplateUnavailable as exc:
            logger.info("kernels will be launched, not forked: %s", exc)
            self._fork = False
            return None

    async def _usable(
        self, template: Template, env: dict[str, str], cwd: Path, *, wait: bool
    ) -> ForkServer | None:
        """``template``'s server if it is ready (after waiting, with ``wait``) and can fork for
        ``env``."""
        try:
            return await template.usable(env, cwd, wait=wait)
        except TemplateUnavailable as exc:
            if self._fork:
                logger.info("kernels will be launched, not forked: %s", exc)
            self._fork = False
            return None


def _started(template: Template) -> bool:
    """Whether ``template`` has imported its modules (and not failed to)."""
    ready = template.ready
    return ready.done() and not ready.cancelled() and ready.exception() is None


def _close_template(template: Template) -> None:
    """Stop a template no longer used, off the loop (its close waits a moment for it)."""
    template.ready.cancel()
    asyncio.get_running_loop().run_in_executor(None, template.server.close)
