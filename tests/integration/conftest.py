"""Fixtures of the integration tier: an executor on real kernels, shared by a module."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor
from support import alive, commands_in_process


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


#: The templates this process's kernel pools fork from (see :func:`_shared_templates`).
_TEMPLATES: list[Any] = []


@pytest.fixture(scope="session", autouse=True)
def _shared_templates(_private_tmpdir: None) -> Iterator[None]:
    """One pair of kernel templates per test process (spawned at its first test of this
    tier), which every executor of the process forks its kernels from (``sharing.adopt``, as
    the run server's children and pytest-xdist's workers under ``pytest --notebooks`` do),
    instead of each executor launching its first kernel and spawning templates of its own:
    the suite's executors live for a test or two, and those starts were a third of its CPU.
    Tests of how a pool starts its own templates take the ``own_templates`` fixture.
    ``NX_TESTS_OWN_TEMPLATES=1``: every pool its own."""
    from notebook_executor._kernels.sharing import adopt, fork_supported

    if os.environ.get("NX_TESTS_OWN_TEMPLATES") or not fork_supported():
        yield
        return
    try:
        _spawn_shared_templates()
        yield
    finally:
        adopt(None)
        for template in _TEMPLATES:
            template.close()
        _TEMPLATES.clear()


def _spawn_shared_templates() -> None:
    """Spawn this process's pair of shared templates, wait until they can fork, adopt them."""
    from notebook_executor._kernels.launch import kernel_environment
    from notebook_executor._kernels.sharing import SharedForkServer, adopt

    env = kernel_environment(None)
    lock = Path(tempfile.gettempdir()) / "templates.lock"
    kernel = SharedForkServer(env, lock, data_modules=False)
    full = SharedForkServer(env, lock.with_name("templates-full.lock"), data_modules=True)
    _TEMPLATES[:] = [kernel, full]
    for template in _TEMPLATES:
        template.spawn()  # from the main thread, which lives as long as the process
    for template in _TEMPLATES:
        template.wait_ready()  # (a process adopts a template that can fork)
    adopt(kernel, full)


@pytest.fixture(autouse=True)
def _shared_templates_alive(
    _shared_templates: None, request: pytest.FixtureRequest
) -> Iterator[None]:
    """After each test, the shared templates still run: one that died (a test killed it, or
    it crashed) is replaced, with a warning naming the test, instead of every later executor
    of the process quietly spawning templates of its own (about a second of CPU each)."""
    yield
    # (A killed template's main thread is a zombie while its other threads exit: not alive.)
    if _TEMPLATES and not all(t.running and t.pid and alive(t.pid) for t in _TEMPLATES):
        from notebook_executor._kernels.sharing import adopt

        adopt(None)
        for template in _TEMPLATES:
            template.close()
        _spawn_shared_templates()
        warnings.warn(
            f"the test process's shared kernel templates died during {request.node.nodeid}: "
            "spawned again (a test that kills templates takes the own_templates fixture)",
            stacklevel=1,
        )


@pytest.fixture
def own_templates() -> Iterator[None]:
    """This test's kernel pools spawn their own templates, as outside the suite."""
    from notebook_executor._kernels.sharing import adopt

    adopt(None)
    try:
        yield
    finally:
        if _TEMPLATES:
            adopt(*_TEMPLATES)


@pytest.fixture(scope="session", autouse=True)
def _commands_in_process() -> None:
    """The command line called in this process runs in-process (``support.commands_in_process``)."""
    commands_in_process()
