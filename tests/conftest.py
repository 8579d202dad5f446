"""Suite-wide checks: the suite must end with no process it started still alive."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest


def _descendants(root: int) -> dict[int, str]:
    """Live descendants of ``root`` as {pid: command line}, read from /proc."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        fields = stat.rsplit(")", 1)[1].split()
        state, ppid = fields[0], int(fields[1])
        if state == "Z":
            continue
        pid = int(entry.name)
        children.setdefault(ppid, []).append(pid)
        commands[pid] = cmdline.strip()
    found: dict[int, str] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found[child] = commands.get(child, "")
            stack.append(child)
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any process started by the suite outlives it."""
    if not Path("/proc").is_dir():
        return
    deadline = time.monotonic() + 10
    leftover = _descendants(os.getpid())
    while leftover and time.monotonic() < deadline:
        time.sleep(0.2)
        leftover = _descendants(os.getpid())
    if leftover:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = "\n".join(f"  pid {pid}: {cmd[:200]}" for pid, cmd in sorted(leftover.items()))
        message = f"processes started by the test suite are still alive:\n{lines}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
