"""Fixtures of the integration tier: an executor on real kernels, shared by a module."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from notebook_executor import NotebookExecutor


@pytest.fixture(scope="module")
def executor(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NotebookExecutor]:
    """One executor for the module's tests (its warm kernels are reused), with its own runs
    folder; a module's ``EXECUTOR_OPTIONS`` (a dict) are passed to it. Closed after them."""
    options: dict[str, Any] = getattr(request.module, "EXECUTOR_OPTIONS", {})
    with NotebookExecutor(runs_dir=tmp_path_factory.mktemp("runs"), **options) as ex:
        yield ex


@pytest.fixture(scope="module")
def bash_kernel() -> str:
    """The name of a real Bash kernel (``bash_kernel``), its kernelspec installed into this
    environment when missing (the test extra installs the package, not its kernelspec)."""
    from jupyter_client.kernelspec import KernelSpecManager

    if "bash" not in KernelSpecManager().find_kernel_specs():
        subprocess.run(
            [sys.executable, "-m", "bash_kernel.install", "--sys-prefix"],
            check=True,
            capture_output=True,
            timeout=120,
        )
    assert "bash" in KernelSpecManager().find_kernel_specs()
    return "bash"
