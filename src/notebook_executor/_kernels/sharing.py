"""Kernel templates shared between processes: the one interface the faces use for it.

Two faces share a template: the run server (``_faces/server``), whose children fork their
kernels from the server's template, and ``pytest --notebooks`` under pytest-xdist
(``_faces/template_lending.py``), whose controller lends its templates to the workers. Both go
through this module alone (an import-linter contract in ``pyproject.toml`` says so):

- :class:`SharedForkServer`: a template several processes fork from, one request at a time
  (:mod:`.shared_template` tells how); :func:`server_template` makes the run server's;
- :func:`adopt` makes templates the ones this process's kernel pools fork from (and
  :func:`adopt_environment` those of notebooks' own environments: :func:`environment_template`
  makes the run server's), and :func:`adopted` is the one adopted;
- :func:`fork_supported`, :func:`startup_environment`, :data:`TEMPLATE_READY_TIMEOUT` and
  :class:`ForkServerError`: whether templates can be used here, the variables an interpreter
  reads as it starts (a template keeps them), how long a template takes at most to start, and
  what a template that cannot start or fork raises.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .forkserver import (
    TEMPLATE_READY_TIMEOUT,
    ForkServerError,
    fork_supported,
    startup_environment,
)
from .shared_template import SharedForkServer, adopt, adopt_environment, adopted

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "TEMPLATE_READY_TIMEOUT",
    "ForkServerError",
    "SharedForkServer",
    "adopt",
    "adopt_environment",
    "adopted",
    "environment_template",
    "fork_supported",
    "server_template",
    "startup_environment",
]


def environment_template(interpreter: str, lock_path: Path) -> SharedForkServer:
    """The run server's template of a notebook's own environment, running ``interpreter``
    (not started), in the environment :func:`server_template` has, requests taking turns on
    ``lock_path``."""
    return SharedForkServer(
        _server_kernel_environment(), lock_path, data_modules=True, interpreter=interpreter
    )


def server_template(lock_path: Path) -> SharedForkServer:
    """The run server's template (not started), its requests taking turns on ``lock_path``.

    Its environment is its kernels' first one (``/proc/<pid>/environ``): the minimal one,
    never the variables of the client that started the server; each kernel then takes its
    own client's whole environment. The interpreter's start-up variables stay, so that the
    kernels of clients that share them are forked.
    """
    return SharedForkServer(_server_kernel_environment(), lock_path)


def _server_kernel_environment() -> dict[str, str]:
    """The environment of the run server's templates: the minimal one it runs with."""
    from .launch import kernel_base_environment, kernel_environment

    own = dict(os.environ)
    base = {
        **kernel_base_environment(own),
        **startup_environment(own),
        **{k: v for k, v in own.items() if k.startswith("NOTEBOOK_EXECUTOR_")},
    }
    return kernel_environment(None, base)
