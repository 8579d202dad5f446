"""How a native kernel starts: its command and options (shared by launcher and fork server)."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["KERNEL_OPTIONS", "KERNEL_SCRIPT", "NATIVE_KERNEL_NAME", "script_command"]

#: The kernel name that means "this interpreter's own ipykernel".
NATIVE_KERNEL_NAME = "python3"

#: Options of every native kernel. IPython's history database is off: a run's cells (and the
#: parameters injected into them) never land in ``~/.ipython``, and no thread writes it. The
#: kernel's fixed pause before each execute reply is off: we read a cell's outputs up to the
#: kernel's idle status, which comes after them on the same channel, never up to the reply.
KERNEL_OPTIONS = ("--HistoryManager.enabled=False", "--IPythonKernel._execute_sleep=0")


#: The kernel-side script: native kernels run it (see :mod:`.template_kernel`).
KERNEL_SCRIPT = Path(__file__).with_name("template_kernel.py")


def script_command(role: str) -> list[str]:
    """The command that runs :data:`KERNEL_SCRIPT` as ``role`` with this interpreter."""
    bootstrap = f"import runpy, sys; runpy.run_path(sys.argv[1], run_name={role!r})"
    return [sys.executable, "-c", bootstrap, str(KERNEL_SCRIPT)]
