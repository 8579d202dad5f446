"""Why a checkpoint cannot be taken, decided without a kernel; the kernel side's own checks."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from notebook_executor._kernels import live
from notebook_executor._kernels.launch import choose_kernel
from notebook_executor.engine import KernelChoice
from support import kernel_program


def _live(choice: KernelChoice) -> live.LiveKernel:
    kernel: Any = SimpleNamespace(session_ids=["id"], info={}, client=None)
    return live.LiveKernel(kernel, choice, context=object())


def test_not_linux_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "fork_supported", lambda: False)
    monkeypatch.setattr(sys, "platform", "darwin")
    kernel = _live(choose_kernel("nb", None, None))
    assert kernel.checkpoint_unsupported() == "checkpoints need Linux (this is darwin)"
    why = asyncio.run(kernel.checkpoint(0))
    assert why == "checkpoints need Linux (this is darwin)"
    assert kernel.checkpoints == []


def test_a_kernel_that_is_not_the_native_one_is_a_reason() -> None:
    kernel = _live(KernelChoice("ir", "R", native=False, interpreter="R"))
    why = kernel.checkpoint_unsupported()
    assert why is not None and "'ir' is not this interpreter's Python kernel" in why


def test_the_native_kernel_on_linux_has_no_reason_before_asking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(live, "fork_supported", lambda: True)
    assert _live(choose_kernel("nb", None, None)).checkpoint_unsupported() is None


def test_an_open_gpu_device_is_seen() -> None:
    """A GPU driver's device cannot be opened here: another device stands in for it."""
    server = kernel_program("checkpoint_server")
    with Path(os.devnull).open("rb"):
        assert server.gpu_devices(("/dev/null",)) == ["/dev/null"]
    assert server.gpu_devices(("/dev/no-such-device",)) == []
    assert server.GPU_DEVICES[0] == "/dev/nvidia"


def test_the_notebooks_threads_are_told_from_the_kernels() -> None:
    server = kernel_program("checkpoint_server")
    stop = threading.Event()
    kernels = threading.Thread(target=stop.wait, name="kernel's own")
    notebooks = threading.Thread(target=stop.wait, name="notebook's")
    kernels.start()
    notebooks.start()
    try:
        app = SimpleNamespace(control_thread=kernels)
        assert notebooks in server.notebook_threads(app)
        assert kernels not in server.notebook_threads(app)
    finally:
        stop.set()
        kernels.join()
        notebooks.join()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_kernels_child_processes_are_seen() -> None:
    import subprocess

    server = kernel_program("checkpoint_server")
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid in server.child_processes()
    finally:
        child.kill()
        child.wait()
    assert child.pid not in server.child_processes()


def test_a_kernel_made_from_a_checkpoint_reuses_the_parsed_command_line() -> None:
    """The template parses a kernel's command line once; kernels forked from a checkpoint
    have another parent, and take the same parse with their own parent's id."""
    kernel: Any = kernel_program("kernel_main")
    options = ["--HistoryManager.enabled=False"]
    template = ["-f", kernel.ANY_FILE, "--IPKernelApp.parent_handle=100", *options]
    app = kernel.kernel_app_class()()
    app.parse_command_line(template)
    kernel.PARSED = (template, app.cli_config, list(app.extra_args))
    parsed = kernel._parsed_command_line(
        ["-f", "/tmp/k/connection.json", "--IPKernelApp.parent_handle=4321", *options]
    )
    assert parsed is not None
    config, _ = parsed
    assert config["KernelApp"]["connection_file"] == "/tmp/k/connection.json"
    assert config["IPKernelApp"]["parent_handle"] == 4321
    assert app.cli_config["IPKernelApp"]["parent_handle"] == 100
    other = ["-f", "/tmp/k/connection.json", "--IPKernelApp.parent_handle=4321"]
    assert kernel._parsed_command_line(other) is None
