"""The run server's fault table: a process of a session SIGKILLed, at each phase of the session.

Each case opens a session from the shell (the real server process, started by the command line
in a runtime folder of its own), kills one process (the server, its kernel template, the
session's host, a checkpoint of the session's kernel) with the session idle or mid-step, and
checks what the user sees: the client fails in one line (exit status 2, no traceback, no hang),
the run record ends truthfully (``open: false``; a step cut short ``interrupted``, naming its
cell), no process of the session is left 10 s after the kill, and the next command starts a
server (or uses the live one) and works.

A checkpoint is the session's to lose (docs/how-to/sessions.md: only a cache of the state):
killed, the
session goes on, and its step succeeds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support import alive, descendants

from .test_run_server import Shell
from .test_run_server import shell as shell  # the fixture, reused

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

#: Cell 2 waits until the file ``release`` exists (it says it started first).
NOTEBOOK = """# %% tags=["parameters"]
n: int = 1

# %%
x = n + 1

# %%
import pathlib, time
pathlib.Path("started").write_text("yes")
deadline = time.monotonic() + 120
while not pathlib.Path("release").exists() and time.monotonic() < deadline:
    time.sleep(0.05)

# %%
y = x + 1
"""

#: Seconds the processes of a session have to disappear once one of them was killed.
GRACE = 10.0


def _wait(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {seconds:g} s"
        time.sleep(0.05)


def _one_line(code: int, err: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def _record(folder: Path, run_id: str) -> dict[str, Any]:
    (path,) = (folder / "runs").glob(f"*/{run_id}.ipynb")
    meta: dict[str, Any] = json.loads(path.read_text())["metadata"]["notebook_executor"]
    return meta


def _session_processes(status: dict[str, Any]) -> dict[str, int]:
    """The session's host, its kernel (forked from the template) and a checkpoint of it."""
    (entry,) = status["sessions"]
    kernels = [
        pid
        for pid in descendants(status["template_pid"])
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        == str(status["template_pid"])
    ]
    (kernel,) = kernels
    return {"host": entry["pid"], "kernel": kernel}


@pytest.mark.parametrize("phase", ["idle", "mid-step"])
@pytest.mark.parametrize("target", ["server", "template", "host", "checkpoint"])
def test_a_process_of_a_session_killed(shell: Shell, target: str, phase: str) -> None:
    folder = shell.folder
    (folder / "steps.py").write_text(NOTEBOOK)
    code, out, err = shell.run("session", "open", "steps.py", "--json")
    assert code == 0, err
    opened = json.loads(out)
    sid, run_id = opened["session_id"], opened["run_id"]
    status = shell.status()
    found = _session_processes(status)
    # The fresh kernel's checkpoint, taken as the session opened.
    _wait(lambda: descendants(found["kernel"]), 30, "a checkpoint")
    found["checkpoint"] = min(descendants(found["kernel"]))
    found.update(server=status["pid"], template=status["template_pid"])
    family = {
        found["host"],
        found["kernel"],
        *descendants(found["kernel"]),
        *descendants(found["host"]),
    }
    if target in ("server", "template"):
        family |= {status["template_pid"], *descendants(status["template_pid"])}
    if target == "server":
        family.add(status["pid"])
    stepping: subprocess.Popen[str] | None = None
    if phase == "mid-step":
        stepping = shell.start("session", "run", sid, "--json")
        _wait(
            lambda: (folder / "started").exists() or stepping.poll() is not None,
            120,
            "the step's cell",
        )
        assert stepping.poll() is None
    else:
        (folder / "release").write_text("yes")
    os.kill(found[target], signal.SIGKILL)
    killed = time.monotonic()

    survives = target == "checkpoint"
    if stepping is not None:
        if survives:
            (folder / "release").write_text("yes")
        out, err = stepping.communicate(timeout=120)
        code = stepping.returncode
    else:
        code, out, err = shell.run("session", "run", sid, "--json")
    if survives:
        # The session goes on: the kernel lives; the checkpoint is lost, not needed.
        assert code == 0, err
        assert json.loads(out)["status"] == "success"
        code, _out, err = shell.run("session", "close", sid)
        assert code == 0, err
    else:
        _one_line(code, err)
        # The session is gone, and says so in one line.
        code, _out, err = shell.run("session", "close", sid)
        _one_line(code, err)

    # The next command works: a new server if the old one was killed.
    code, _out, err = shell.run("run", "hello.py")
    assert code == 0, err
    after = shell.status()
    assert after["pid"] is not None
    if target == "server":
        assert after["pid"] != status["pid"]
    else:
        assert after["pid"] == status["pid"]

    # No process of the session is left.
    _wait(lambda: not any(alive(pid) for pid in family), killed + GRACE - time.monotonic(), "gone")

    # The record ends truthfully, and the catalog agrees with it.
    code, out, err = shell.run("show", run_id, "--json")
    assert code == 0, err
    shown = json.loads(out)
    record = _record(folder, run_id)
    if survives:
        assert (shown["status"], record["session"]["open"]) == ("success", False)
    elif target == "host":
        # Killed outright, the host wrote nothing more: the catalog sees its process gone.
        assert (shown["status"], shown["error_kind"]) == ("error", "interrupted")
    else:
        assert record["session"]["open"] is False
        assert shown["status"] == record["status"]
        if phase == "mid-step":
            assert (shown["error_kind"], shown["failed_cell"]["index"]) == ("interrupted", 2)
            assert record["error_kind"] == "interrupted"
        else:
            # Nothing ran when the session ended; or the next step began first, and was cut
            # short (the template's death is seen within a fifth of a second).
            assert shown["status"] == "success" or shown["error_kind"] == "interrupted", shown
        why = record["session"]["log"][-1]["why"]
        assert why.startswith("the run server"), why


def test_a_template_killed_mid_run_fails_the_run_truthfully_and_is_replaced(shell: Shell) -> None:
    """The template SIGKILLed while a served run's cell runs: the kernel dies with it, the run
    ends ``kernel_died`` on that cell (its record and row say so, exit status 1; it was killed
    by a SIGPIPE on the dead template's socket, the run left ``running``), and the server forks
    the next runs from a new template (it kept the dead one)."""
    (shell.folder / "wait.py").write_text(NOTEBOOK)
    code, _out, err = shell.run("run", "hello.py", "-p", "name", "Ada")  # a warm server
    assert code == 0, err
    template = shell.status()["template_pid"]
    process = shell.start("run", "wait.py", "--json")
    _wait((shell.folder / "started").exists, 120, "the cell did not start")
    os.kill(template, signal.SIGKILL)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1, err
    result = json.loads(out)
    assert (result["status"], result["error_kind"]) == ("error", "kernel_died")
    assert result["failed_cell"]["index"] == 2
    record = _record(shell.folder, result["run_id"])
    assert record["status"] == "error"
    _wait(lambda: shell.status()["template_pid"] not in (None, template), 60, "no new template")
    code, out, err = shell.run("run", "hello.py", "-p", "name", "Bo", "--json")
    assert code == 0, err
    kernel_parent = json.loads(out)["status"]
    assert kernel_parent == "success"
    assert alive(shell.status()["template_pid"])


#: Cell 2 starts a process in the kernel's session but in a process group of its own and with
#: no environment (so a sweep cannot tell it is the kernel's): only the kill of the kernel's
#: live session reaches it. It writes its pid down, then waits.
LONER = """# %%
import pathlib, subprocess, time
loner = subprocess.Popen(["sleep", "600"], env={}, process_group=0)
pathlib.Path("loner").write_text(str(loner.pid))
time.sleep(120)
"""


def test_a_client_killed_mid_cell_has_its_kernels_session_killed(shell: Shell) -> None:
    """The client's process group SIGKILLed while a served run's cell runs, its output a pipe
    no one reads any more: the command's process (the server's child) still ends the run's
    kernel with its whole session (it died of the SIGPIPE of its last words to the dead
    client, after killing the kernel and before killing its session)."""
    (shell.folder / "loner.py").write_text(LONER)
    code, _out, err = shell.run("run", "hello.py", "-p", "name", "Ada")  # a warm server
    assert code == 0, err
    client = subprocess.Popen(
        [sys.executable, "-m", "notebook_executor", "run", "loner.py", "--json"],
        cwd=shell.folder,
        env=shell.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    loner = 0
    try:
        _wait(lambda: (shell.folder / "loner").exists(), 120, "the cell did not start")
        _wait(lambda: (shell.folder / "loner").read_text().isdigit(), 5, "no pid written")
        loner = int((shell.folder / "loner").read_text())
        os.killpg(client.pid, signal.SIGKILL)
        client.wait()
        deadline = time.monotonic() + GRACE
        while alive(loner) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(loner), "the kernel's session outlived its killed client"
        # The server serves on.
        code, out, err = shell.run("run", "hello.py", "-p", "name", "Bo", "--json")
        assert code == 0, err
        assert json.loads(out)["status"] == "success"
    finally:
        if loner and alive(loner):
            os.kill(loner, signal.SIGKILL)
        if client.poll() is None:
            os.killpg(client.pid, signal.SIGKILL)
            client.wait()
