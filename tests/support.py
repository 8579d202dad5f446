"""Helpers shared by the test tiers: processes read from /proc, reports past capture, and the
command line run in-process on a test engine.

Importable as ``support`` from every test module (``pythonpath`` in the pytest settings).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from notebook_executor._types import FailedCell

__all__ = [
    "RESULT_KEYS",
    "SESSION_MARKER",
    "alive",
    "cli_on_engine",
    "cli_on_path",
    "descendants",
    "failed_cell",
    "kernel_program",
    "marked_processes",
    "report",
    "run_cli",
    "shell_blocks",
    "wait_gone",
]

#: The keys of the result dict, in order (docs/reference/results.md), written here once and pinned
#: by the
#: tests that compare a result's keys with it: a copy of the contract, not read from the
#: package, so that a change there fails a test. Once the package exports a ``TypedDict`` of
#: the result, the tests pin its keys against this list.
RESULT_KEYS = [
    "run_id",
    "status",
    "error_kind",
    "notebook",
    "output_path",
    "parameters",
    "request",
    "started_at",
    "finished_at",
    "duration_seconds",
    "cells_total",
    "cells_executed",
    "failed_cell",
    "scraps",
    "output_cut",
    "edited_cells",
    "reused_cells",
    "reused_from",
    "resumed_from",
    "state_notes",
]

#: Environment variable the suite sets in its own process (so every process it starts, and
#: every process those start, inherits it): how an orphan reparented to init is still known.
SESSION_MARKER = "NOTEBOOK_EXECUTOR_TEST_SESSION"


def _stat_fields(pid: str) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: fields start after the last ')'.
    return stat.rsplit(")", 1)[1].split()


def _cmdline(pid: str) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    fields = _stat_fields(str(pid))
    return fields is not None and fields[0] != "Z"


def descendants(root: int) -> dict[int, str]:
    """Live descendants of ``root`` as ``{pid: command line}``, from one read of /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if fields is None or fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: dict[int, str] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found[child] = _cmdline(str(child))
            stack.append(child)
    return found


def marked_processes(token: str) -> dict[int, str]:
    """Live processes, other than this one, whose environment holds ``SESSION_MARKER=token``:
    those the suite started, wherever they were reparented."""
    wanted = f"{SESSION_MARKER}={token}".encode()
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        fields = _stat_fields(entry.name)
        if fields is None or fields[0] == "Z":
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            found[int(entry.name)] = _cmdline(entry.name)
    return found


def wait_gone(pids: Iterable[int], seconds: float = 10.0) -> set[int]:
    """Wait up to ``seconds`` for ``pids`` to exit; return those still alive."""
    pending = set(pids)
    deadline = time.monotonic() + seconds
    while pending and time.monotonic() < deadline:
        pending = {pid for pid in pending if alive(pid)}
        if pending:
            time.sleep(0.1)
    return {pid for pid in pending if alive(pid)}


def report(config: pytest.Config, text: str) -> None:
    """Print ``text`` on the terminal, past pytest's output capture."""
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is None:
        print(text)
        return
    with capture.global_and_fixture_disabled():
        print(text)


def cli_on_engine(monkeypatch: pytest.MonkeyPatch, engine: Any) -> None:
    """Make every executor the command line opens run on ``engine`` (a test double)."""
    from notebook_executor import NotebookExecutor
    from notebook_executor._faces.cli import common

    def factory(args: Any, **options: Any) -> NotebookExecutor:
        return NotebookExecutor(runs_dir=args.runs_dir, engine=engine, **options)

    monkeypatch.setattr(common, "executor", factory)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command line in-process: ``(exit status, stdout, stderr)``."""
    from notebook_executor._faces.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def failed_cell(result: Mapping[str, Any]) -> FailedCell:
    """The ``failed_cell`` of a result that has one (a failing assertion when it has none)."""
    found: FailedCell | None = result["failed_cell"]
    assert found is not None, f"no failed_cell: {result['status']}, {result['error_kind']}"
    return found


def cli_on_path(folder: Path) -> dict[str, str]:
    """An environment whose ``notebook-executor`` (found on ``PATH``, as a user's shell finds
    it) runs this checkout's code with this interpreter: a script made in ``folder``."""
    import shlex
    import sys

    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "notebook-executor"
    script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m notebook_executor "$@"\n')
    script.chmod(0o755)
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    return env


def shell_blocks(markdown: str, language: str = "bash") -> list[str]:
    """The lines of a markdown text's fenced ``language`` blocks (indented ones too), in
    order, blank lines and comments left out."""
    import re

    fence = rf"^ *```{re.escape(language)}\n(.*?)^ *```"
    blocks = re.findall(fence, markdown, re.MULTILINE | re.DOTALL)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def commands_in_process() -> None:
    """The command line called in the test process (``main(argv)``) runs there, in-process,
    as with ``NOTEBOOK_EXECUTOR_NO_SERVER=1``; the processes the suite starts, which inherit
    its environment, go through the run server."""
    from notebook_executor._faces.server import client

    forward = client.forward
    if getattr(forward, "in_process", False):
        return

    def in_process(argv: Any) -> int | None:
        saved = os.environ.get("NOTEBOOK_EXECUTOR_NO_SERVER")
        os.environ["NOTEBOOK_EXECUTOR_NO_SERVER"] = "1"
        try:
            return forward(argv)
        finally:
            if saved is None:
                os.environ.pop("NOTEBOOK_EXECUTOR_NO_SERVER", None)
            else:
                os.environ["NOTEBOOK_EXECUTOR_NO_SERVER"] = saved

    in_process.in_process = True  # type: ignore[attr-defined]
    client.forward = in_process


def kernel_program(name: str) -> Any:
    """A kernel-side program (``_kernels/inside/<name>.py``), loaded by path as kernels load
    it, under a name of its own (``_probe_<name>``)."""
    import importlib.util

    from notebook_executor._kernels import inside

    path = Path(inside.__file__).parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_probe_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
