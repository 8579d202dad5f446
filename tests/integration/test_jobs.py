"""Jobs (docs/how-to/jobs.md), against the real run server started by each test through the
command line (its own runtime folder), and the API's ``submit``."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from integration.test_run_server import Shell
from integration.test_run_server import shell as shell  # the fixture, reused
from notebook_executor import NotebookExecutor

pytestmark = pytest.mark.kernel

SLOW = """\
# %% tags=["parameters"]
n = 3
# %%
import time
print("start", flush=True)
# %%
for i in range(n):
    print("tick", i, flush=True)
    time.sleep(0.5)
# %%
print("done")
"""

QUICK = """\
# %% tags=["parameters"]
x = 0
# %%
import scrapbook as sb
sb.glue("double", x * 2)
"""


def _until(check: Callable[[], Any], seconds: float = 60.0) -> Any:
    """Poll ``check`` until it answers something true (or fail after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {seconds} s")


def _detach(shell: Shell, *argv: str) -> str:
    code, out, err = shell.run("run", *argv, "--detach", "--json")
    assert code == 0, err
    job_id: str = json.loads(out)["job_id"]
    return job_id


def _show(shell: Shell, job_id: str) -> dict[str, Any]:
    code, out, err = shell.run("job", "show", job_id, "--json")
    assert code == 0, err
    shown: dict[str, Any] = json.loads(out)
    return shown


def _state(shell: Shell, job_id: str) -> dict[str, Any]:
    """The job's state file as the server keeps it (read without a process's start-up)."""
    found = list(Path(shell.env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"]).glob(f"*/*-j/{job_id}.json"))
    assert len(found) == 1
    state: dict[str, Any] = json.loads(found[0].read_text())
    return state


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie is gone too
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def _runs(shell: Shell) -> list[dict[str, Any]]:
    code, out, err = shell.run("runs", "--json")
    assert code == 0, err
    runs: list[dict[str, Any]] = json.loads(out)
    return runs


def test_a_job_outlives_its_client_and_is_a_run_record(shell: Shell) -> None:
    (shell.folder / "slow.py").write_text(SLOW)
    started = time.monotonic()
    job_id = _detach(shell, "slow.py", "-p", "n", "6")
    assert time.monotonic() - started < 30  # the client returned, the job goes on
    running = _until(lambda: (s := _show(shell, job_id))["cell"] == 2 and s)
    assert running["status"] == "running"
    assert running["result"] is None
    assert "start" in running["tail"]
    (live,) = _runs(shell)
    assert live["status"] == "running"
    code, out, err = shell.run("job", "wait", job_id, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "success"
    assert result["parameters"] == {"n": 6}
    (ended,) = _runs(shell)
    assert ended["run_id"] == result["run_id"]
    assert ended["status"] == "success"
    shown = _show(shell, job_id)
    assert shown["status"] == "success"
    assert shown["cell"] is None
    assert shown["result"]["run_id"] == result["run_id"]
    assert "tick 5" in shown["tail"]
    code, out, _ = shell.run("job", "logs", job_id)
    assert code == 0
    assert "tick 0" in out
    assert "done" in out
    code, out, _ = shell.run("jobs", "--json")
    assert [j["job_id"] for j in json.loads(out)] == [job_id]


def test_job_wait_with_a_short_timeout_gives_the_status_then_the_result(shell: Shell) -> None:
    (shell.folder / "slow.py").write_text(SLOW)
    job_id = _detach(shell, "slow.py", "-p", "n", "4")
    code, out, err = shell.run("job", "wait", job_id, "--timeout", "0.2", "--json")
    assert code == 3, err
    status = json.loads(out)
    assert status["job_id"] == job_id
    assert status["status"] in ("queued", "running")
    assert status["result"] is None
    code, out, err = shell.run("job", "wait", job_id, "--timeout", "120", "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "success"


def test_job_cancel_stops_the_cell_within_a_second(shell: Shell) -> None:
    (shell.folder / "slow.py").write_text(SLOW)
    job_id = _detach(shell, "slow.py", "-p", "n", "600")
    _until(lambda: _state(shell, job_id)["cell"] == 2)
    code, _, err = shell.run("job", "cancel", job_id)
    asked = time.monotonic()
    assert code == 0, err
    state = _until(lambda: (s := _state(shell, job_id))["status"] != "running" and s, 10)
    assert time.monotonic() - asked < 1.0
    assert state["status"] == "cancelled"
    assert state["result"]["error_kind"] == "cancelled"
    assert state["result"]["failed_cell"]["index"] == 2
    code, out, _ = shell.run("job", "wait", job_id, "--json")
    assert code == 130
    assert json.loads(out)["error_kind"] == "cancelled"
    assert _until(lambda: _gone(state["pid"]), 10)


def test_a_server_killed_mid_job_leaves_an_interrupted_record_and_no_process(
    shell: Shell,
) -> None:
    (shell.folder / "slow.py").write_text(SLOW)
    job_id = _detach(shell, "slow.py", "-p", "n", "600")
    _until(lambda: _state(shell, job_id)["cell"] == 2)
    server = shell.status()["pid"]
    template = shell.status()["template_pid"]
    job_pid = _state(shell, job_id)["pid"]
    os.kill(server, signal.SIGKILL)
    assert _until(lambda: _gone(job_pid) and _gone(server) and (not template or _gone(template)))
    state = _state(shell, job_id)
    assert state["status"] == "interrupted"
    assert state["result"]["error_kind"] == "interrupted"
    assert state["result"]["failed_cell"]["index"] == 2
    code, out, err = shell.run("jobs", "--json")
    assert code == 0, err
    (listed,) = json.loads(out)
    assert listed["status"] == "interrupted"
    (record,) = _runs(shell)
    assert record["error_kind"] == "interrupted"
    assert record["failed_cell"]["index"] == 2


def test_twenty_jobs_submitted_at_once_all_finish_with_their_records(shell: Shell) -> None:
    (shell.folder / "quick.py").write_text(QUICK)
    assert shell.run("run", "quick.py")[0] == 0  # the server started, warm
    clients = [
        shell.start("run", "quick.py", "-p", "x", str(i), "--detach", "--json") for i in range(20)
    ]
    ids = []
    for client in clients:
        out, err = client.communicate(timeout=120)
        assert client.returncode == 0, err
        ids.append(json.loads(out)["job_id"])
    assert len(set(ids)) == 20
    results = []
    for job_id in ids:
        code, out, err = shell.run("job", "wait", job_id, "--json")
        assert code == 0, err
        results.append(json.loads(out))
    assert [r["parameters"]["x"] for r in results] == list(range(20))
    assert [r["scraps"]["double"] for r in results] == [2 * i for i in range(20)]
    runs = {r["run_id"]: r for r in _runs(shell)}
    assert len(runs) == 21
    for result in results:
        assert runs[result["run_id"]]["status"] == "success"
        assert runs[result["run_id"]]["parameters"] == result["parameters"]


def test_detach_refuses_bad_input_at_once(shell: Shell) -> None:
    code, out, err = shell.run("run", "missing.py", "--detach")
    assert (code, out) == (2, "")
    assert err.strip() == "notebook-executor: error: missing.py: no such file"
    alone = {"NOTEBOOK_EXECUTOR_NO_SERVER": "1"}
    code, _, err = shell.run("run", "missing.py", "--detach", env=alone)
    assert code == 2
    assert "--detach needs the run server" in err
    code, _, err = shell.run("job", "show", "jnothere")
    assert code == 2
    assert err.count("\n") == 1


def test_the_api_submit_status_wait_and_cancel(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        job = ex.submit(tmp_path / "slow.py", parameters={"n": 2})
        with pytest.raises(TimeoutError):
            job.wait(timeout=0.05)
        result = job.wait(timeout=120)
        assert result["status"] == "success"
        status = job.status()
        assert status["status"] == "success"
        assert status["result"] == result
        assert "tick 1" in status["tail"]
        long = ex.submit(tmp_path / "slow.py", parameters={"n": 600})
        _until(lambda: long.status()["cell"] == 2)
        started = time.perf_counter()
        for _ in range(100):
            long.status()
        assert (time.perf_counter() - started) / 100 < 0.02
        assert long.cancel()
        cancelled = long.wait(timeout=10)
        assert cancelled["error_kind"] == "cancelled"
        failed = cancelled["failed_cell"]
        assert failed is not None
        assert failed["index"] == 2
        assert long.status()["status"] == "cancelled"
        bad = ex.submit(tmp_path / "missing.py")
        with pytest.raises(Exception, match="no such file"):
            bad.wait(timeout=30)
        assert bad.status()["status"] == "error"


def test_runs_shows_the_cell_a_running_run_is_in(shell: Shell) -> None:
    (shell.folder / "slow.py").write_text(SLOW)
    job_id = _detach(shell, "slow.py", "-p", "n", "600")
    live = _until(lambda: (r := _runs(shell)) and r[0].get("cell") == 2 and r[0], 60)
    assert live["status"] == "running"
    code, out, err = shell.run("runs")
    assert code == 0, err
    assert f"{live['run_id']}  running (cell 2)" in out
    assert shell.run("job", "cancel", job_id)[0] == 0
    ended = _until(lambda: (r := _runs(shell)[0])["status"] != "running" and r, 30)
    assert "cell" not in ended
    assert ended["failed_cell"]["index"] == 2


SESSION = SLOW.replace("n = 3", "n = 600")


def test_a_session_step_is_a_job(shell: Shell) -> None:
    (shell.folder / "slow.py").write_text(SESSION)
    code, session_id, err = shell.run("session", "open", "slow.py")
    assert code == 0, err
    session_id = session_id.strip()
    code, out, err = shell.run("session", "run", session_id, "--until", "1", "--detach")
    assert code == 0, err
    first = out.strip()
    code, out, err = shell.run("job", "wait", first)
    assert (code, err) == (0, "")
    assert out.startswith("success: cells [0, 1] ran")  # as ``session run`` prints it
    code, out, err = shell.run("session", "run", session_id, "--detach", "--json")
    assert code == 0, err
    second = json.loads(out)["job_id"]
    running = _until(lambda: (s := _show(shell, second))["cell"] == 2 and s)
    assert running["status"] == "running"
    assert _state(shell, second)["pid"] != _state(shell, first)["pid"]
    assert shell.run("job", "cancel", second)[0] == 0
    assert _until(lambda: _show(shell, second)["status"] == "cancelled", 10)
    code, _, err = shell.run("job", "wait", second)
    assert code == 130
    code, out, err = shell.run("session", "rerun", "nosuchsession", "--from", "2", "--detach")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert shell.run("session", "close", session_id)[0] == 0
