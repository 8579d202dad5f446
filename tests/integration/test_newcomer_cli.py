"""What a newcomer trips on at the command line (issue 46, item 4), on the real command line,
its run server and real kernels: ``server stop`` waits for the server to be gone, a session
cancelled once ends with the status of what it is, ``session list`` tells sessions of one
notebook apart, and a modified run and output cut from a run are said in the human summaries.

Every test starts its own server (the ``shell`` fixture of ``test_run_server``) and stops it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from .test_run_server import Shell
from .test_run_server import shell as shell  # the fixture, reused

pytestmark = pytest.mark.kernel

SLOW_STEP = """# %% tags=["parameters"]
seed: int = 1
label: str = "plain"

# %%
import pathlib, time
pathlib.Path("started").write_text("yes")
time.sleep(60)

# %%
x = seed * 2
"""

EDITED = """# %%
import scrapbook as sb

# %%
sb.glue("answer", 1)

# %%
print("template")
"""


def _wait_for(what: str, check: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not callable(check) or not check():
        assert time.monotonic() < deadline, f"no {what} within {seconds:g} s"
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def test_server_stop_waits_until_the_server_is_gone_and_status_says_it_is_stopping(
    shell: Shell,
) -> None:
    code, _out, err = shell.run("run", "hello.py")
    assert code == 0, err
    status = shell.status()
    pid = status["pid"]
    # The server forks the next command's child ahead; stopped (SIGSTOP), that child takes the
    # server's SIGTERM only once continued: the server stays, stopping, until then.
    _wait_for("spare child", lambda: [c for c in _children(pid) if c != status["template_pid"]])
    held = [child for child in _children(pid) if child != status["template_pid"]]
    for child in held:
        os.kill(child, signal.SIGSTOP)
    try:
        code, _out, err = shell.run("server", "stop", "--timeout", "1")
        assert code == 1, err
        assert f"run server {pid} is still stopping after 1 s" in err
        code, out, err = shell.run("server", "status")
        assert code == 0 and out.startswith(f"run server {pid} is stopping ("), (out, err)
        stopping = shell.status()
        assert stopping["pid"] == pid and stopping["stopping"] is True
        # Asked again, with no socket to ask: the same wait, on the same server.
        code, _out, err = shell.run("server", "stop", "--timeout", "0.5")
        assert code == 1 and f"run server {pid} is still stopping" in err, err
    finally:
        for child in held:
            os.kill(child, signal.SIGCONT)
    _wait_for("server gone", lambda: shell.status()["pid"] is None)
    # A server that stops at once: when stop returns, it is gone, and status says so.
    code, _out, err = shell.run("run", "hello.py")
    assert code == 0, err
    pid = shell.status()["pid"]
    code, _out, err = shell.run("server", "stop")
    assert code == 0 and err.strip() == f"stopped run server {pid}", err
    assert _gone(pid)
    code, out, _err = shell.run("server", "status")
    assert out.strip() == "no run server"
    code, _out, err = shell.run("server", "stop")
    assert code == 0 and err.strip() == "no run server"


def _gone(pid: int) -> bool:
    """Whether process ``pid`` exited (a zombie until whoever started it reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_a_session_cancelled_once_ends_with_the_status_of_what_it_is(shell: Shell) -> None:
    (shell.folder / "slow.py").write_text(SLOW_STEP)
    code, session_id, err = shell.run("session", "open", "slow.py", "-p", "seed", "5")
    assert code == 0, err
    session_id = session_id.strip()
    code, out, err = shell.run("session", "run", session_id, "--until", "0")
    assert code == 0 and out.startswith("success"), (out, err)
    step = shell.start("session", "run", session_id)
    started = shell.folder / "started"
    _wait_for("cell started", started.exists)
    step.send_signal(signal.SIGINT)
    _out, err = step.communicate(timeout=120)
    assert step.returncode != 0 and "interrupted" in err, err
    # A later step that succeeds: the session is what it made of it, not the cancelled cell.
    code, out, err = shell.run("session", "run", session_id, "--until", "0", "--json")
    assert code == 0, (out, err)
    later = json.loads(out)
    assert later["status"] == "success" and later["error_kind"] is None, later
    code, out, err = shell.run("session", "close", session_id, "--json")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    code, out, err = shell.run("show", run_id, "--json")
    assert code == 0, err
    closed = json.loads(out)
    assert (closed["status"], closed["error_kind"]) == ("success", None), closed
    # The log still holds the cancelled step.
    [record] = (shell.folder / "runs").rglob(f"{run_id}.ipynb")
    log = json.loads(record.read_text())["metadata"]["notebook_executor"]["session"]["log"]
    assert [entry.get("status") for entry in log if entry["kind"] == "step"] == [
        "success",
        "cancelled",
        "success",
    ]


def test_session_list_shows_each_session_s_parameters_without_secrets(shell: Shell) -> None:
    (shell.folder / "slow.py").write_text(SLOW_STEP)
    token = "tok-" + "7f3a9c41e2" * 3
    env = {"NBX_TOKEN": token}
    opened = []
    for seed in ("1", "2"):
        code, out, err = shell.run(
            "session", "open", "slow.py", "-p", "seed", seed, "-p", "label", token,
            "--secret", "NBX_TOKEN", env=env,
        )  # fmt: skip
        assert code == 0, err
        opened.append(out.strip())
    try:
        code, out, err = shell.run("session", "list")
        assert code == 0, err
        lines = {line.split()[0]: line for line in out.splitlines()}
        assert "seed=1, label='[secret NBX_TOKEN]'" in lines[opened[0]], out
        assert "seed=2, label='[secret NBX_TOKEN]'" in lines[opened[1]], out
        code, out, err = shell.run("server", "status", "--json")
        assert token not in out and token[:12] not in out
        code, out, err = shell.run("session", "list", "--json")
        assert token not in out
    finally:
        for session_id in opened:
            shell.run("session", "close", session_id)


def test_a_modified_run_and_output_cut_are_said_in_the_human_summaries(shell: Shell) -> None:
    (shell.folder / "edited.py").write_text(EDITED)
    (shell.folder / "edit.txt").write_text('print("x" * 1_000_100)\n')
    code, out, err = shell.run(
        "run", "edited.py", "--edit", "2", "edit.txt", "--edit-note", "a longer print"
    )
    assert code == 0, err
    first, *rest = out.splitlines()
    assert first.startswith("success: edited.py [modified: cell 2] ("), out
    [cut] = [line for line in rest if line.startswith("output cut:")]
    assert cut.startswith("output cut: cell 2 (streams over 1,000,000 characters"), cut
    run_id = next(line.split()[1] for line in rest if line.startswith("run: "))
    code, out, err = shell.run("show", run_id)
    assert code == 0 and "[modified: cell 2]" in out.splitlines()[0] and cut in out, out
    code, out, err = shell.run("run", "edited.py")
    assert code == 0 and "modified" not in out and "output cut" not in out, out
    code, out, err = shell.run("runs")
    marks = {line.split()[0]: "[modified: cell 2]" in line for line in out.splitlines()[1:]}
    assert marks[run_id] is True and list(marks.values()).count(True) == 1, out


def test_run_v_says_how_a_script_without_cell_markers_was_read(shell: Shell) -> None:
    (shell.folder / "plain.py").write_text("x = 1\nprint(x)\n")
    code, _out, err = shell.run("-v", "run", "plain.py")
    assert code == 0, err
    assert (
        "plain.py: read as a script with no '# %%' cell markers (jupytext's light format): "
        "one cell" in err
    ), err
    code, _out, err = shell.run("-v", "run", "hello.py")
    assert code == 0 and "cell markers" not in err, err
