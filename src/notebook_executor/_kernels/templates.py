"""Template processes of a kernel pool: spawned fork servers, and whether one can serve a kernel.

A template is a :class:`~.forkserver.ForkServer` spawned on the pool's loop, with the task that
waits until it has imported its modules. A template that cannot be spawned, or fails to start,
raises :class:`TemplateUnavailable`: the pool then launches its kernels instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .launch import kernel_environment

if TYPE_CHECKING:
    from .forkserver import ForkServer

__all__ = ["Template", "TemplateUnavailable", "spawn_template"]


class TemplateUnavailable(Exception):
    """No kernel can be forked from this template (or none at all, on this platform)."""


@dataclass(frozen=True)
class Template:
    """A spawned fork server and the task that waits until it has imported its modules;
    ``adopted`` when it is the template this process adopted (:mod:`.shared_template`), which
    the pool only uses: its owner closes it."""

    server: ForkServer
    ready: asyncio.Task[None]
    adopted: bool = False

    def close(self) -> None:
        """Stop the template, unless it is the adopted one: later pools of this process fork
        from that one too (a pool that closed it made every later pool spawn its own)."""
        if not self.adopted:
            self.server.close()

    @property
    def dead(self) -> bool:
        """True once the template, having started, is gone (killed, crashed): its kernels went
        with it, and it forks no more."""
        ready = self.ready
        if not ready.done() or ready.cancelled() or ready.exception() is not None:
            return False
        return not self.server.running

    @property
    def pid(self) -> int | None:
        """The template process's pid, or None once it is gone."""
        return self.server.pid

    async def usable(self, env: dict[str, str], cwd: Path, *, wait: bool) -> ForkServer | None:
        """The server if it is ready (after waiting for it, with ``wait``) and can fork a
        kernel for ``env`` and ``cwd``; None when it is not ready yet or cannot fork this one.

        Raises
        ------
        TemplateUnavailable
            The template failed to start, or its start was cancelled.
        """
        ready = self.ready
        if not ready.done() and wait:
            try:
                await asyncio.shield(ready)
            except asyncio.CancelledError:
                # The template's start was cancelled (seen below); the waiting run was not,
                # unless it is this task that is cancelled: then it ends here.
                if not ready.cancelled():
                    raise
            except Exception:
                pass  # the template failed to start: seen below
        if not ready.done():
            return None
        if ready.cancelled() or ready.exception() is not None:
            raise TemplateUnavailable(str(ready))
        return self.server if self.server.compatible(env, cwd) else None


def spawn_template(*, data_modules: bool, interpreter: str | None = None) -> Template:
    """Spawn a template (``data_modules``: importing the common data modules too; running
    ``interpreter``, default this one), from the running loop's thread, where kernels can be
    forked (``forkserver.fork_supported()``).

    Raises
    ------
    TemplateUnavailable
        The template could not be spawned.
    """
    from .forkserver import ForkServer, ForkServerError
    from .shared_template import adopted

    # (A notebook's own environment has templates of its own: a run server's children adopt
    # the server's.)
    shared = adopted(data_modules, interpreter)
    if shared is not None:
        # Another process's template (shared_template.py): a run server's, ready already, or
        # one that pytest-xdist's controller lends, fetched meanwhile.
        loop = asyncio.get_running_loop()
        if shared.pid is not None:
            return Template(shared, loop.create_task(_already_ready()), adopted=True)
        ready = loop.create_task(asyncio.to_thread(shared.wait_ready))
        return Template(shared, ready, adopted=True)
    server = ForkServer(
        kernel_environment(None), data_modules=data_modules, interpreter=interpreter
    )
    # Spawned from the loop thread, which lives as long as the engine: the template's
    # parent-death signal is tied to the thread that created it.
    try:
        server.spawn()
    except (OSError, ForkServerError) as exc:
        raise TemplateUnavailable(str(exc)) from None
    ready = asyncio.get_running_loop().create_task(asyncio.to_thread(server.wait_ready))
    return Template(server, ready)


async def _already_ready() -> None:
    """The readiness of a template that was ready before it was handed over."""
