"""The kernel's file audit (``_kernels/inside/file_audit.py``), without a kernel: its hook is
called directly, never added to this process (an audit hook cannot be removed)."""

from __future__ import annotations

import importlib.util
import json
import os
import types
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from notebook_executor._kernels import live


def _file_audit() -> ModuleType:
    """The kernel-side program, loaded by path as kernels load it."""
    path = Path(live.__file__).parent / "inside" / "file_audit.py"
    spec = importlib.util.spec_from_file_location("_probe_file_audit", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _install(
    module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[Any], list[Any]]:
    """``module.install`` on a stand-in kernel: (the kernel, the hooks it added, the exit
    handlers it registered), none of them added to this process."""
    hooks: list[Any] = []
    exits: list[Any] = []
    monkeypatch.setattr("sys.addaudithook", hooks.append)
    monkeypatch.setattr("atexit.register", exits.append)
    kernel = types.SimpleNamespace(finish_metadata=lambda parent, metadata, content: metadata)
    module.install(kernel)
    return kernel, hooks, exits


CELL = {"content": {"code": "open('data.csv')", "silent": False, "store_history": True}}
WARM_UP = {"content": {"code": "pass", "silent": False, "store_history": False}}


def test_the_hook_is_a_plain_function_that_notes_opens_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CPython calls the hook on every audit event (``builtins.id``: thousands per matplotlib
    figure); a bound method costs it some 0.5 us more per event than a function does."""
    module = _file_audit()
    monkeypatch.delenv(module.TIMING_VAR, raising=False)
    kernel, (hook,), exits = _install(module, monkeypatch)
    assert isinstance(hook, types.FunctionType) and hook.__name__ == "hook"
    assert exits == []
    data = tmp_path / "data.csv"
    hook("builtins.id", (object(),))
    hook("open", (str(data), "r", 0))
    hook("open", (data, "w", os.O_WRONLY | os.O_CREAT))
    hook("open", (3, "r", 0))  # a file descriptor: not a path
    metadata = kernel.finish_metadata(CELL, {}, {})
    assert metadata == {module.FILES_KEY: {"files": [[str(data), "rw"]], "dropped": 0}}
    assert kernel.finish_metadata(CELL, {}, {}) == {}


def test_the_timing_counts_the_events_once_the_kernel_ran_a_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _file_audit()
    folder = tmp_path / "timing"
    folder.mkdir()
    monkeypatch.setenv(module.TIMING_VAR, str(folder))
    kernel, (hook,), (at_exit,) = _install(module, monkeypatch)
    data = tmp_path / "data.csv"
    hook("builtins.id", (object(),))
    assert kernel.finish_metadata(WARM_UP, {}, {}) == {}
    assert list(folder.iterdir()) == []  # a kernel that only warmed up writes nothing
    hook("open", (str(data), "r", 0))
    hook("open", (str(folder / "x.json"), "w", os.O_WRONLY))  # its own folder: not noted
    metadata = kernel.finish_metadata(CELL, {}, {})
    assert metadata == {module.FILES_KEY: {"files": [[str(data), "r"]], "dropped": 0}}
    (written,) = folder.iterdir()
    timing = json.loads(written.read_text())
    assert timing["events"] == {"builtins.id": 1, "open": 2}
    assert timing["replies"] == 2
    assert timing["final"] is False
    assert timing["install_ns"] > 0 and timing["hook_ns"] > 0 and timing["window_ns"] > 0
    at_exit()  # as the kernel exits
    assert json.loads(written.read_text())["final"] is True
