"""How a native kernel starts: its command and options (shared by launcher and fork server)."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = [
    "KERNEL_OPTIONS",
    "KERNEL_SCRIPTS",
    "NATIVE_KERNEL_NAME",
    "is_own_interpreter",
    "script_command",
]

#: The kernel name that means "this interpreter's own ipykernel".
NATIVE_KERNEL_NAME = "python3"

#: Options of every native kernel. IPython's history database is off: a run's cells (and the
#: parameters injected into them) never land in ``~/.ipython``, and no thread writes it. The
#: kernel's fixed pause before each execute reply is off: we read a cell's outputs up to the
#: kernel's idle status, which comes after them on the same channel, never up to the reply.
KERNEL_OPTIONS = ("--HistoryManager.enabled=False", "--IPythonKernel._execute_sleep=0")


#: The kernel-side programs, by role: native kernels run ``inside/kernel_main.py``
#: (:mod:`.inside.kernel_main`), the fork server's template ``inside/template_server.py``
#: (:mod:`.inside.template_server`). Each runs by path and imports nothing of the package.
KERNEL_SCRIPTS = {
    "__nbx_kernel__": Path(__file__).with_name("inside") / "kernel_main.py",
    "__nbx_template__": Path(__file__).with_name("inside") / "template_server.py",
}


def script_command(role: str, interpreter: str | None = None) -> list[str]:
    """The command that runs the program of ``role`` (see :data:`KERNEL_SCRIPTS`) with
    ``interpreter`` (default: this one; a notebook's own environment's otherwise: the programs
    import nothing but ipykernel, and are run by path). Another interpreter's kernels get the
    stand-ins' folder last on ``sys.path`` (:mod:`.stand_ins`: ``scrapbook.glue`` with no
    scrapbook in the environment)."""
    from .stand_ins import FOLDER

    append = "" if is_own_interpreter(interpreter) else f"sys.path.append({str(FOLDER)!r}); "
    bootstrap = f"import runpy, sys; {append}runpy.run_path(sys.argv[1], run_name={role!r})"
    return [interpreter or sys.executable, "-c", bootstrap, str(KERNEL_SCRIPTS[role])]


def is_own_interpreter(interpreter: str | None) -> bool:
    """Whether ``interpreter`` (a :class:`~notebook_executor.engine.KernelChoice`'s) is the
    one that runs the executor."""
    return interpreter is None or interpreter == sys.executable
